"""memprof inside training frameworks: callbacks that profile chosen steps of a run.

- :mod:`memprof.integrations.transformers`: ``MemprofCallback`` for ``transformers.Trainer``
  (``pip install 'torch-memprof[hf]'``);
- :mod:`memprof.integrations.lightning`: ``MemprofCallback`` for ``lightning.Trainer`` (or
  ``pytorch_lightning.Trainer``; ``pip install 'torch-memprof[lightning]'``).

Each imports its framework when imported itself; this package imports none of them.
"""
