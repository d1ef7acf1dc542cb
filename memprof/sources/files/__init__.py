"""Recordings made elsewhere, read from files: chrome traces, CUDA memory snapshots and the
tables torch prints."""
