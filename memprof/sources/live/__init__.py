"""A live run under torch.profiler: warm-up, profile, explain and time (:mod:`.run` is the
sequence; the other modules are its steps)."""
