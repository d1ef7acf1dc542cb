"""Records -> numbers: peaks, per-op tables, nesting, diffs, attribution, allocator model.

Pure computation: no torch, no I/O, no rendering."""
