"""What torch.compile made of a compiled run (:class:`CompileSection`): how many graphs Dynamo
captured, each graph break with its reason and where it happened, and each recompile with the
guard that failed. Read from Dynamo during the compile the run makes anyway."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields


@dataclass(frozen=True, kw_only=True)
class GraphBreak:
    """A graph break: Dynamo stopped capturing here and ran the statement eagerly, ending one
    graph and starting another. ``reason``: why (Dynamo's own words, its explanation when it
    gives one); ``source``: the statement (the innermost line of the user's or a library's
    code, ``modeling_gpt2.py:703``) with its text; ``user_source``: the user's own line that
    led there, when another; ``count``: the breaks of that reason there (once per traced
    call path: a break inside a layer breaks every layer's call)."""

    reason: str = fields.text(required=True)
    source: str = fields.text(default="")
    source_text: str = fields.text(default="")
    user_source: str = fields.text(default="", omit=lambda item: not item.user_source)
    user_source_text: str = fields.text(default="", omit=lambda item: not item.user_source_text)
    count: int = fields.count(default=1)


@dataclass(frozen=True, kw_only=True)
class Recompile:
    """A function Dynamo compiled again, because a guard of its compiled code failed (a new
    shape, a changed Python value): ``function`` (a graph break's resumed part is named
    ``torch_dynamo_resume_in_<function>_at_<line>``), ``source`` its ``file:line``, ``guard``
    the first guard that failed."""

    function: str = fields.text(required=True)
    source: str = fields.text(default="")
    guard: str = fields.text(default="")


@dataclass(frozen=True, kw_only=True)
class CompileSection:
    """What Dynamo made of a compiled run: ``graphs`` captured by the first (compiling) call (a
    graph break makes one more), its ``breaks`` (most frequent first) and the ``recompiles``
    from then to the end of the profiled calls (each compiles its graphs again)."""

    graphs: int = fields.count()
    breaks: tuple[GraphBreak, ...] = fields.items(GraphBreak)
    recompiles: tuple[Recompile, ...] = fields.items(Recompile)

    def __post_init__(self) -> None:
        object.__setattr__(self, "breaks", tuple(self.breaks))
        object.__setattr__(self, "recompiles", tuple(self.recompiles))

    def summary(self) -> str:
        """``3 graphs, 2 graph breaks, no recompile``."""
        graphs = f"{self.graphs} graph{'s' if self.graphs != 1 else ''}"
        count = sum(b.count for b in self.breaks)
        breaks = f"{count} graph break{'s' if count != 1 else ''}" if count else "no graph break"
        n = len(self.recompiles)
        recompiles = f"{n} recompile{'s' if n != 1 else ''}" if n else "no recompile"
        return f"{graphs}, {breaks}, {recompiles}"
