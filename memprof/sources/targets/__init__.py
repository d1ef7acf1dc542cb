"""Targets and their inputs: ``module:function`` to a callable, and the usage mistakes found
from the source before anything runs."""
