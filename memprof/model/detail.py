"""A report's detail: the payload of its kind (a sweep, advice, ...), one typed value on
:class:`memprof.model.report.Report`, written under its own JSON key (``sweep``, ``advice``).

A kind's payload is a dataclass that registers its key where it is defined::

    @detail("toy")
    @dataclass(frozen=True, kw_only=True)
    class Toy:
        said: str = fields.text()

and a report holding one is ``Report(..., detail=Toy(said="hello"))``, written as
``"toy": {"said": "hello"}`` and read back from that key. Every module of :mod:`memprof.model`
is imported before a document is first read, so a payload defined there needs no other line;
one defined elsewhere registers when its module is imported.
"""

from __future__ import annotations

from memprof.core import fields


def _import_the_model() -> None:
    # The payloads defined in memprof.model register on import: import every module of its
    # folder (found by the folder, not by a list that each new payload would have to join).
    import importlib
    import pkgutil
    from pathlib import Path

    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{package}.{module.name}")


DETAILS = fields.Choices("report detail", discover=_import_the_model)
"""Every kind's payload type, by JSON key, in the order they registered."""

detail = DETAILS.register
"""A class decorator: ``@detail("key")`` makes the class a report's detail, written under ``key``."""
