"""The run controller layer: one controller per Locust environment, how runs begin and end, the run folder,
the ledger, resume, the stress policy, options, the lag monitor, worker identity, progress."""
