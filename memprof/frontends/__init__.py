"""The front ends: the ``memprof`` command line and its commands, the notebook magic and the
pytest plugin. Each parses what the user gave and makes one library call."""
