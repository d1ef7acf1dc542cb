"""Built-in workloads, runnable as targets (``memprof run memprof.examples.similarity:similarity``)."""
