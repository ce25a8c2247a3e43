"""Runs and their store: the data pipeline of a run, its code fingerprint, the crash-safe store and
its catalog, training one run in this process, and result tables."""
