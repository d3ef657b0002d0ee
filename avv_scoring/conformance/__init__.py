"""The conformance suite (scoring layer): does a vendor honour the request? Modules, bottom up: ``probes`` (a probe
request and its metadata, the shipped fixed requests), ``checks`` (each check declared once: its probes and its
judgment), ``suite`` (the probe file of a conformance run, and the results table of its records).
docs/how-to/conformance.md describes the suite."""
