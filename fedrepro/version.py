"""The package's version, in one place: the run store and the CLI record it."""
VERSION = "0.1.0"
