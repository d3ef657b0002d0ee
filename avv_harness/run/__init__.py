"""The run controller layer: one controller per Locust environment (it holds its role and its lifecycle and asks
them), how runs begin and end, the load at each tick, the run folder, the ledger, resume, the stress policy,
options, the lag monitor, worker identity, progress."""
