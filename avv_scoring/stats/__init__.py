"""Statistics on plain arrays (the lowest folder of avv_scoring: it imports nothing else of ours): exact tests,
interval formulas, the resampling arithmetic, sequential tests and the two-sample identity test. What applies them
to the registry's metrics is :mod:`avv_scoring.metrics` (uncertainty, noise floor, IRF)."""
