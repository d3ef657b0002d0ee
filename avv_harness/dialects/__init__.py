"""Vendor dialects: the dialect in a vendor's config, request transforms and adapters, global overrides, raw
mode's local chat templates."""
