"""Metrics: the registry (each metric declared once) and the modules that declare them, run per vendor by
:mod:`avv_scoring.metrics.vendor_table`; and the statistics that read the registry (the bootstrap and the noise
floor over the metrics' additive forms, :mod:`.uncertainty`, :mod:`.noise_floor`; IRF, :mod:`.irf`). The math they
use, on plain arrays, is the folder below, :mod:`avv_scoring.stats`."""
