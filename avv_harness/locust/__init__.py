"""The Locust layer: the options hook, User classes and shape, the item protocol between master and workers,
the web UI and its live board. The only code of ours that imports Locust."""
