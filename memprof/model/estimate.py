"""What an estimate adds to a run (``memprof estimate``): how it was estimated, each value fake
execution had to guess, the caching allocator's replay (:class:`EstimateSection`), and whether
it fits a device (:class:`Fits`)."""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core import fields


@dataclass(frozen=True, kw_only=True)
class AllocatorReplay:
    """An estimate's allocations and frees, from the first input made to the end of the
    estimated call, replayed through the CUDA caching-allocator model (default settings, one
    stream), as on a device with no limit: the highest allocated bytes (block sizes) and
    reserved bytes (whole segments, each a ``cudaMalloc``), reserved above allocated, segments
    held at the end and asked for in all, the largest cached free block at the end.

    With a ``capacity_bytes``, replayed once more within it, as the allocator would behave on
    that device (when a segment does not fit, it frees its cached segments and tries again):
    the highest reserve there (``capacity_reserved_peak_bytes``) and the requests that found
    no room even then (``ooms``: the run does not fit)."""

    settings: str = fields.text(default="default")
    allocated_peak_bytes: int = fields.size()
    reserved_peak_bytes: int = fields.size()
    reserve_overhead_bytes: int = fields.size()
    segments: int = fields.count()
    segment_allocations: int = fields.count()
    largest_free_block_bytes: int = fields.size()
    capacity_bytes: int | None = fields.maybe_size()
    capacity_reserved_peak_bytes: int | None = fields.maybe_size()
    ooms: int = fields.count()


@dataclass(frozen=True, kw_only=True)
class Guess:
    """A statement whose code asked fake execution for a value it cannot know (``bool(t)``,
    ``t.item()``, ``int(t)``, ...) and got a placeholder: what was asked (``kind``: ``bool``,
    ``int`` or ``float``), where (``source``, the innermost statement of the user's or a
    library's code, with its text, and the user's own line that led there when another), how
    many times, and whether the guessed value ``steers`` the program (decides what runs or
    how much is allocated; ``steered_at``: where it first did)."""

    kind: str = fields.text(required=True, choices=("bool", "int", "float"))
    source: str = fields.text(default="")
    source_text: str = fields.text(default="")
    user_source: str = fields.text(default="", omit=lambda guess: not guess.user_source)
    user_source_text: str = fields.text(default="", omit=lambda guess: not guess.user_source_text)
    count: int = fields.count()
    steers: bool = fields.flag()
    steered_at: str = fields.text(default="", omit=lambda guess: not guess.steered_at)


@dataclass(frozen=True, kw_only=True)
class EstimateSection:
    """How a run was estimated (``memprof estimate``): whose allocator it models (``cpu``,
    ``cuda``), the seconds the fake execution took (warm-up included), the ops of the estimated
    call, each op with a measured workspace and its largest (bytes), the ops whose workspaces
    could not be measured, the scalar reads answered with a placeholder (``placeholders``; each
    statement that asked, in ``guesses``), whether the estimate can be relied on (``reliable``:
    false when a guessed value steered the program, which may then have taken another path
    than a real run), the CUDA allocator's replay, and on CUDA the host memory the step's
    tensors held at most (``host_peak_bytes``: tensors put on the host, such as an optimizer's
    state offloaded to the CPU; none of it is in the device's figures; left out when none)."""

    modelled_device: str = fields.text(default="cuda", choices=("cpu", "cuda"))
    seconds: float = fields.number()
    ops: int = fields.count()
    workspace_ops: dict[str, int] = fields.mapping(fields.SIZE)
    unmeasured_ops: tuple[str, ...] = fields.items(fields.TEXT)
    placeholders: int = fields.count()
    allocator: AllocatorReplay | None = fields.optional(AllocatorReplay)
    reliable: bool = fields.flag(default=True)
    guesses: tuple[Guess, ...] = fields.items(Guess, omit=lambda section: not section.guesses)
    host_peak_bytes: int | None = fields.maybe_size()


@dataclass(frozen=True, kw_only=True)
class Fits:
    """Whether an estimate fits a device's memory: ``capacity_bytes`` (``gpu`` names the card
    it came from, when one was named), less ``reserve_bytes`` kept for what lies outside the
    caching allocator (the CUDA context, libraries' handles and workspaces), the bytes the run
    needs (``needed``: the reserved peak on CUDA, the footprint on the CPU; the largest over the
    runs) and what is left (``headroom_bytes`` = capacity - reserve - needed; negative: short by
    that much). ``reliable`` is false when the estimate guessed values that steer the program
    (see :class:`EstimateSection`): then ``fits`` is false too, as nothing can be claimed."""

    capacity_bytes: int = fields.size(required=True)
    fits: bool = fields.flag()
    headroom_bytes: int = fields.signed_size()
    needed_bytes: int = fields.size()
    needed: str = fields.text(default="footprint_bytes", choices=("footprint_bytes", "reserved_peak_bytes"))
    run: str | None = fields.optional_text()
    gpu: str | None = fields.optional_text()
    reserve_bytes: int = fields.size()
    reliable: bool = fields.flag(default=True)

    @property
    def usable_bytes(self) -> int:
        """What the run may take: the capacity less the reserve."""
        return self.capacity_bytes - self.reserve_bytes
