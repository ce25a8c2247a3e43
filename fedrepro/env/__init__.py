"""The machine and the session: host facts, output settings, the allocator, the trace of what ran,
and the plotting style. Imports nothing of fedrepro above :mod:`fedrepro.errors`."""
