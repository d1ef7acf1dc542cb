"""Fake-tensor execution for estimates: one device (:mod:`.run`), one rank of an N-rank job
(:mod:`.job`), the values it has to guess, and the memory-saving techniques advice tries."""
