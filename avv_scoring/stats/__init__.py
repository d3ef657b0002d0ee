"""Statistics: exact tests, bootstrap intervals and noise-floor tests, IRF."""
