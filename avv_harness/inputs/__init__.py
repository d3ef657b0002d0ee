"""Inputs: the vendor config (validated before any request), secrets and their redaction, the BFCL importer."""
