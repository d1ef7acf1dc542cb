"""Where records come from: a live profiler run, its targets and inputs, trace files,
snapshots, fake execution. None of them renders or gates."""
