"""The version of memprof (``memprof --version``, every report's ``memprof_version``)."""

__version__ = "0.1.0"
