"""Metrics: the registry (each metric declared once) and the modules that declare them, run per vendor by
:mod:`avv_scoring.metrics.vendor_table`."""
