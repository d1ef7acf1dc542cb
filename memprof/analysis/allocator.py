"""A model of PyTorch's CUDA caching allocator (``c10/cuda/CUDACachingAllocator.cpp``).

The rules, with default settings: a request is rounded up to a multiple of 512 B; requests up
to 1 MiB use the small pool, which grows by 2 MiB segments; larger requests below 10 MiB get a
20 MiB segment, larger ones a segment rounded up to 2 MiB; a request takes the smallest free
block of its pool and stream that fits, lowest address among equals; the block is split when
the remainder is at least 512 B (small pool) or more than 1 MiB (large pool); a freed block
merges with free neighbours of its segment. ``max_split_size_mb`` stops blocks of that size or
more from being split or used for smaller requests; ``expandable_segments:True`` replaces
segments by one growing range per pool and stream, mapped in 2 MiB (small) or 20 MiB (large)
pages. When a segment cannot be had (``capacity_bytes``), the allocator frees cached segments
and retries before it reports out of memory, as torch does.

Three uses: :func:`replay_snapshot` checks the model against a snapshot's recorded trace (every
placement and segment), :func:`what_if` replays a snapshot's trace under other settings, and
:func:`simulate` runs a plain sequence of allocations and frees (no addresses), for estimates.
Pure Python over plain numbers: no torch, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from memprof.core.records import MIN_BLOCK_SIZE, round_size

__all__ = ["MIN_BLOCK_SIZE", "round_size"]  # the allocator's rounding, defined with the records

SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20
_UNLIMITED = 1 << 62
_UNLIMITED_ADDRESS_SPACE = 1 << 40


@dataclass(frozen=True)
class AllocatorSettings:
    """The allocator settings the model follows (``PYTORCH_CUDA_ALLOC_CONF``).

    ``max_split_size_bytes`` None means unlimited (torch's default); ``capacity_bytes`` is the
    memory the allocator can reserve (None: unlimited, nothing ever runs out).
    """

    expandable_segments: bool = False
    max_split_size_bytes: int | None = None
    capacity_bytes: int | None = None

    def describe(self) -> str:
        """``expandable_segments:True,max_split_size_mb:128``-style text (``default``)."""
        parts = []
        if self.expandable_segments:
            parts.append("expandable_segments:True")
        if self.max_split_size_bytes is not None:
            parts.append(f"max_split_size_mb:{self.max_split_size_bytes >> 20}")
        return ",".join(parts) or "default"


def allocation_size(size: int) -> int:
    """The segment ``cudaMalloc`` gets for a rounded request no free block could hold."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((size + ROUND_LARGE - 1) // ROUND_LARGE)


class _Segment:
    __slots__ = ("addr", "size", "stream", "small", "expandable", "page")

    def __init__(self, addr: int, size: int, stream: int, small: bool, expandable: bool = False) -> None:
        self.addr, self.size, self.stream, self.small = addr, size, stream, small
        self.expandable = expandable
        self.page = SMALL_BUFFER if small else LARGE_BUFFER


class _Block:
    __slots__ = ("addr", "size", "requested", "allocated", "mapped", "prev", "next", "seg")

    def __init__(self, addr: int, size: int, seg: _Segment, mapped: bool = True) -> None:
        self.addr, self.size, self.seg, self.mapped = addr, size, seg, mapped
        self.requested = 0
        self.allocated = False
        self.prev: _Block | None = None
        self.next: _Block | None = None


class _FreeList:
    """A pool's free blocks ordered as torch's ``BlockComparatorSize``: (size, address)."""

    __slots__ = ("keys", "blocks")

    def __init__(self) -> None:
        self.keys: list[tuple[int, int]] = []
        self.blocks: dict[int, _Block] = {}

    def add(self, block: _Block) -> None:
        insort(self.keys, (block.size, block.addr))
        self.blocks[block.addr] = block

    def remove(self, block: _Block) -> None:
        del self.keys[bisect_left(self.keys, (block.size, block.addr))]
        del self.blocks[block.addr]


@dataclass(frozen=True)
class OutOfMemory:
    """A request the model could not place: what it asked and what the allocator held."""

    requested_bytes: int
    rounded_bytes: int
    allocated_bytes: int
    reserved_bytes: int
    largest_free_block_bytes: int
    free_on_device_bytes: int | None


class CachingAllocator:
    """The allocator of one device. Addresses of new segments come from ``segment_address``
    (``(size, expandable) -> address``); by default they are handed out upwards, which only
    decides ties between equal free blocks of different segments."""

    def __init__(
        self,
        settings: AllocatorSettings | None = None,
        segment_address: Callable[[int, bool], int] | None = None,
    ) -> None:
        self.settings = settings or AllocatorSettings()
        self._max_split = self.settings.max_split_size_bytes or _UNLIMITED
        self._segment_address = segment_address or self._next_address
        self._bump = 1 << 44
        self._free: dict[tuple[int, bool], _FreeList] = {}
        self._unmapped: dict[tuple[int, bool], dict[int, _Block]] = {}
        self._segments: dict[int, _Segment] = {}
        self._live: dict[int, _Block] = {}
        self.allocated_bytes = self.requested_bytes = self.reserved_bytes = 0
        self.allocated_peak_bytes = self.requested_peak_bytes = self.reserved_peak_bytes = 0
        self.segment_log: list[tuple[str, int, int]] = []
        """Every segment the model asked for or gave back: (``segment_alloc`` |
        ``segment_free`` | ``segment_map`` | ``segment_unmap``, address, bytes)."""
        self.ooms: list[OutOfMemory] = []

    # ---- what the model holds -----------------------------------------------------------

    @property
    def segments(self) -> int:
        """Segments held (an expandable segment counts once)."""
        return len(self._segments)

    def free_blocks(self) -> list[tuple[int, int, bool]]:
        """(address, size, small pool) of every free (cached) block."""
        return [(b.addr, b.size, b.seg.small) for fl in self._free.values() for b in fl.blocks.values()]

    def largest_free_block(self, small: bool | None = None, stream: int | None = None) -> int:
        """Size of the largest free block (of one pool / stream when given), 0 if none."""
        best = 0
        for (block_stream, block_small), fl in self._free.items():
            if fl.keys and (small is None or small == block_small) and stream in (None, block_stream):
                best = max(best, fl.keys[-1][0])
        return best

    def unusable_free_bytes(self, request: int, stream: int = 0) -> int:
        """Cached bytes that could not hold a request of ``request`` bytes: free blocks of the
        other pool, of other streams, or too small for it."""
        size = round_size(request)
        small = size <= SMALL_SIZE
        total = 0
        for (block_stream, block_small), fl in self._free.items():
            for block_size, _ in fl.keys:
                if block_small != small or block_stream != stream or block_size < size:
                    total += block_size
        return total

    def holds(self, addr: int) -> bool:
        """Whether a block is allocated at ``addr``."""
        return addr in self._live

    def live_blocks(self) -> dict[int, tuple[int, int]]:
        """address -> (block size, requested bytes) of every allocated block."""
        return {addr: (b.size, b.requested) for addr, b in self._live.items()}

    def layout(self) -> set[tuple[int, int, bool]]:
        """(address, size, allocated) of every mapped block of every segment."""
        found = {(b.addr, b.size, True) for b in self._live.values()}
        found.update((addr, size, False) for addr, size, _ in self.free_blocks())
        return found

    # ---- seeding (a snapshot's state before its trace) ----------------------------------

    def seed_segment(
        self,
        addr: int,
        size: int,
        small: bool,
        live: Iterable[tuple[int, int, int]] = (),
        stream: int = 0,
    ) -> None:
        """Add an existing segment whose allocated blocks are ``live`` (address, size,
        requested); the space between them is free, merged as the allocator keeps it."""
        seg = _Segment(addr, size, stream, small)
        self._segments[addr] = seg
        self.reserved_bytes += size
        cursor, prev = addr, None
        for block_addr, block_size, requested in sorted(live):
            if block_addr < cursor or block_addr + block_size > addr + size:
                raise ValueError(f"block {block_addr:#x}+{block_size} does not fit segment {addr:#x}")
            if block_addr > cursor:
                prev = self._seed_block(seg, cursor, block_addr - cursor, prev, None)
            prev = self._seed_block(seg, block_addr, block_size, prev, requested)
            cursor = block_addr + block_size
        if cursor < addr + size:
            self._seed_block(seg, cursor, addr + size - cursor, prev, None)
        self._note_peaks()

    def _seed_block(
        self, seg: _Segment, addr: int, size: int, prev: _Block | None, requested: int | None
    ) -> _Block:
        block = _Block(addr, size, seg)
        block.prev = prev
        if prev is not None:
            prev.next = block
        if requested is None:
            self._pool(seg.stream, seg.small).add(block)
        else:
            block.allocated, block.requested = True, requested
            self._live[addr] = block
            self.allocated_bytes += size
            self.requested_bytes += requested
        return block

    # ---- the allocator's operations -----------------------------------------------------

    def malloc(self, requested: int, stream: int = 0) -> tuple[int, int] | None:
        """Allocate ``requested`` bytes: (address, block size), or None when out of memory
        (recorded in :attr:`ooms`)."""
        size = round_size(requested)
        small = size <= SMALL_SIZE
        block = self._get_free_block(stream, small, size)
        if block is None:
            block = self._alloc_block(stream, small, size)
            if block is None and self._release_available(stream, small, size):
                block = self._alloc_block(stream, small, size)
            if block is None:
                self.empty_cache()
                block = self._alloc_block(stream, small, size)
            if block is None:
                self._out_of_memory(requested, size, stream, small)
                return None
        if self._should_split(block, size):
            rest = _Block(block.addr + size, block.size - size, block.seg)
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._pool(stream, small).add(rest)
        block.allocated, block.requested = True, requested
        self._live[block.addr] = block
        self.allocated_bytes += block.size
        self.requested_bytes += requested
        self._note_peaks()
        return block.addr, block.size

    def free(self, addr: int) -> int:
        """Free the block allocated at ``addr``; returns its size. KeyError if none is."""
        block = self._live.pop(addr)
        self.allocated_bytes -= block.size
        self.requested_bytes -= block.requested
        size = block.size
        block.allocated, block.requested = False, 0
        self._merge(block, block.prev)
        self._merge(block, block.next)
        self._pool(block.seg.stream, block.seg.small).add(block)
        return size

    def release_segment(self, addr: int) -> bool:
        """Give back (``cudaFree``) the segment at ``addr`` if it is wholly free."""
        seg = self._segments.get(addr)
        if seg is None or seg.expandable:
            return False
        fl = self._pool(seg.stream, seg.small)
        block = fl.blocks.get(addr)
        if block is None or block.prev is not None or block.next is not None:
            return False
        self._release_block(block)
        return True

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: give back every wholly free segment and every free
        page of expandable segments."""
        for fl in list(self._free.values()):
            for block in list(fl.blocks.values()):
                if not block.seg.expandable and block.prev is None and block.next is None:
                    self._release_block(block)
        for fl in list(self._free.values()):
            for block in list(fl.blocks.values()):
                if block.seg.expandable:
                    self._unmap_block(block)

    # ---- internals ----------------------------------------------------------------------

    def _pool(self, stream: int, small: bool) -> _FreeList:
        fl = self._free.get((stream, small))
        if fl is None:
            fl = self._free[(stream, small)] = _FreeList()
        return fl

    def _next_address(self, size: int, expandable: bool) -> int:
        addr = self._bump
        self._bump += -(-size // ROUND_LARGE) * ROUND_LARGE + ROUND_LARGE
        return addr

    def _note_peaks(self) -> None:
        self.allocated_peak_bytes = max(self.allocated_peak_bytes, self.allocated_bytes)
        self.requested_peak_bytes = max(self.requested_peak_bytes, self.requested_bytes)
        self.reserved_peak_bytes = max(self.reserved_peak_bytes, self.reserved_bytes)

    def _fits(self, size: int) -> bool:
        capacity = self.settings.capacity_bytes
        return capacity is None or self.reserved_bytes + size <= capacity

    def _get_free_block(self, stream: int, small: bool, size: int) -> _Block | None:
        fl = self._free.get((stream, small))
        if fl is None:
            return None
        keys, blocks = fl.keys, fl.blocks
        i = bisect_left(keys, (size, -1))
        if i == len(keys):
            return None
        block = blocks[keys[i][1]]
        if block.seg.expandable:
            if self.settings.expandable_segments:
                # Best fit counts an expandable tail as the size it can grow to.
                while i + 1 < len(keys) and block.seg.expandable:
                    candidate = blocks[keys[i + 1][1]]
                    if _growable(candidate) >= _growable(block):
                        break
                    i, block = i + 1, candidate
            else:
                i += 1
                while i < len(keys) and blocks[keys[i][1]].seg.expandable:
                    i += 1
                if i == len(keys):
                    return None
                block = blocks[keys[i][1]]
        if size < self._max_split and block.size >= self._max_split:
            return None  # no oversize block for a smaller request
        if size >= self._max_split and block.size >= size + LARGE_BUFFER:
            return None  # an oversize block may be rounded up, within 20 MiB
        del keys[i]
        del blocks[block.addr]
        return block

    def _should_split(self, block: _Block, size: int) -> bool:
        remaining = block.size - size
        if block.seg.small or self.settings.expandable_segments:
            return remaining >= MIN_BLOCK_SIZE
        return size < self._max_split and remaining > SMALL_SIZE

    def _alloc_block(self, stream: int, small: bool, size: int) -> _Block | None:
        if self.settings.expandable_segments:
            return self._alloc_expandable(stream, small, size)
        segment_size = allocation_size(size)
        if not self._fits(segment_size):
            return None
        addr = self._segment_address(segment_size, False)
        seg = _Segment(addr, segment_size, stream, small)
        self._segments[addr] = seg
        self.reserved_bytes += segment_size
        self.segment_log.append(("segment_alloc", addr, segment_size))
        return _Block(addr, segment_size, seg)

    def _release_available(self, stream: int, small: bool, size: int) -> bool:
        """Free oversize cached blocks (``max_split_size``) enough for ``size``; torch's
        ``release_available_cached_blocks``."""
        if self._max_split == _UNLIMITED:
            return False
        fl = self._pool(stream, small)
        key_size = max(size, self._max_split)
        i = bisect_left(fl.keys, (key_size, -1))
        if i < len(fl.keys):
            return self._release_whole(fl.blocks[fl.keys[i][1]])
        released = 0
        for block_size, addr in reversed(list(fl.keys)):
            if released >= key_size or block_size < self._max_split:
                break
            if self._release_whole(fl.blocks[addr]):
                released += block_size
        return released >= key_size

    def _release_whole(self, block: _Block) -> bool:
        if block.seg.expandable or block.prev is not None or block.next is not None:
            return False
        self._release_block(block)
        return True

    def _release_block(self, block: _Block) -> None:
        self._pool(block.seg.stream, block.seg.small).remove(block)
        del self._segments[block.seg.addr]
        self.reserved_bytes -= block.size
        self.segment_log.append(("segment_free", block.addr, block.size))

    def _merge(self, dst: _Block, src: _Block | None) -> None:
        """Merge the free neighbour ``src`` into ``dst`` (torch's ``try_merge_blocks``)."""
        if src is None or src.allocated or src.mapped != dst.mapped:
            return
        if src.mapped:
            self._pool(src.seg.stream, src.seg.small).remove(src)
        else:
            del self._unmapped[(src.seg.stream, src.seg.small)][src.addr]
        if dst.prev is src:
            dst.addr, dst.prev = src.addr, src.prev
            if dst.prev is not None:
                dst.prev.next = dst
        else:
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
        dst.size += src.size

    def _out_of_memory(self, requested: int, size: int, stream: int, small: bool) -> None:
        capacity = self.settings.capacity_bytes
        self.ooms.append(
            OutOfMemory(
                requested_bytes=requested,
                rounded_bytes=size,
                allocated_bytes=self.allocated_bytes,
                reserved_bytes=self.reserved_bytes,
                largest_free_block_bytes=self.largest_free_block(small, stream),
                free_on_device_bytes=None if capacity is None else capacity - self.reserved_bytes,
            )
        )

    # ---- expandable segments --------------------------------------------------------------

    def _alloc_expandable(self, stream: int, small: bool, size: int) -> _Block | None:
        """torch's ``try_allocate_expandable_block``: map pages at the lowest address where
        free and unmapped space together hold ``size``."""
        candidate = self._find_expandable_block(stream, small, size)
        if not candidate.mapped and not self._map_block(candidate, min(candidate.size, size)):
            return None
        while candidate.size < size:
            # Invariant: a free block followed by unmapped space (find_expandable_block).
            following = candidate.next
            if following is None or following.mapped:
                return None
            if not self._map_block(following, min(size - candidate.size, following.size)):
                return None
            candidate = following
        self._pool(stream, small).remove(candidate)
        return candidate

    def _find_expandable_block(self, stream: int, small: bool, size: int) -> _Block:
        unmapped = self._unmapped.setdefault((stream, small), {})
        for addr in sorted(unmapped):
            candidate = unmapped[addr]
            if candidate.prev is not None and not candidate.prev.allocated:
                candidate = candidate.prev
            room = 0
            cursor: _Block | None = candidate
            while room < size and cursor is not None and not cursor.allocated:
                room += cursor.size
                cursor = cursor.next
            if room >= size:
                return candidate
        page = SMALL_BUFFER if small else LARGE_BUFFER
        capacity = self.settings.capacity_bytes
        span = _UNLIMITED_ADDRESS_SPACE if capacity is None else capacity + capacity // 8
        span = -(-span // page) * page
        seg = _Segment(self._segment_address(span, True), span, stream, small, expandable=True)
        self._segments[seg.addr] = seg
        block = _Block(seg.addr, span, seg, mapped=False)
        unmapped[seg.addr] = block
        return block

    def _map_block(self, block: _Block, size: int) -> bool:
        seg, page = block.seg, block.seg.page
        first = (block.addr - seg.addr) // page
        last = -(-(block.addr + size - seg.addr) // page)
        mapped = (last - first) * page
        if not self._fits(mapped):
            return False
        del self._unmapped[(seg.stream, seg.small)][block.addr]
        block.mapped = True
        if mapped < block.size:
            rest = _Block(block.addr + mapped, block.size - mapped, seg, mapped=False)
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = mapped
            self._unmapped[(seg.stream, seg.small)][rest.addr] = rest
        start = block.addr
        self._merge(block, block.prev)
        self._merge(block, block.next)
        self._pool(seg.stream, seg.small).add(block)
        self.reserved_bytes += mapped
        self.segment_log.append(("segment_map", start, mapped))
        return True

    def _unmap_block(self, block: _Block) -> None:
        """Unmap the whole pages inside the free block (torch's ``unmap_block``); give the
        segment back when nothing of it stays mapped."""
        seg, page = block.seg, block.seg.page
        first = -(-(block.addr - seg.addr) // page)
        last = (block.addr + block.size - seg.addr) // page
        if first >= last:
            return
        fl = self._pool(seg.stream, seg.small)
        fl.remove(block)
        start, length = seg.addr + first * page, (last - first) * page
        before, after = start - block.addr, block.addr + block.size - start - length
        if before > 0:
            head = _Block(block.addr, before, seg)
            head.prev, head.next = block.prev, block
            if block.prev is not None:
                block.prev.next = head
            block.prev = head
            fl.add(head)
        if after > 0:
            tail = _Block(start + length, after, seg)
            tail.prev, tail.next = block, block.next
            if block.next is not None:
                block.next.prev = tail
            block.next = tail
            fl.add(tail)
        block.addr, block.size, block.mapped = start, length, False
        self._merge(block, block.prev)
        self._merge(block, block.next)
        unmapped = self._unmapped.setdefault((seg.stream, seg.small), {})
        unmapped[block.addr] = block
        self.reserved_bytes -= length
        self.segment_log.append(("segment_unmap", start, length))
        if block.prev is None and block.next is None:
            del unmapped[block.addr]
            del self._segments[seg.addr]


def _growable(block: _Block) -> int:
    following = block.next
    return block.size + (following.size if following is not None and not following.mapped else 0)


# --------------------------------------------------------------------------------------------
# Plain sequences of allocations and frees (estimates)


@dataclass(frozen=True)
class Simulation:
    """What the allocator would hold for a sequence of allocations and frees.

    ``allocated_peak_bytes`` is what ``torch.cuda.max_memory_allocated`` would report (block
    sizes), ``requested_peak_bytes`` the same in requested bytes, ``reserved_peak_bytes`` what
    ``max_memory_reserved`` would; ``reserve_overhead_bytes`` = reserved peak - allocated peak
    (what caching and fragmentation cost beyond the allocated peak); ``allocated_bytes``,
    ``reserved_bytes``, ``segments``, ``largest_free_block_bytes`` at the end;
    ``segment_allocations`` how many segments (or page mappings) were asked of the device.
    """

    settings: str
    allocated_peak_bytes: int
    requested_peak_bytes: int
    reserved_peak_bytes: int
    reserve_overhead_bytes: int
    allocated_bytes: int
    reserved_bytes: int
    segments: int
    segment_allocations: int
    largest_free_block_bytes: int
    ooms: tuple[OutOfMemory, ...] = field(default=())


def simulate(
    actions: Iterable[tuple[Hashable, int]],
    settings: AllocatorSettings | None = None,
    stream: int = 0,
) -> Simulation:
    """Run ``actions`` through the allocator model from an empty device.

    Each action is ``(key, nbytes)``: ``nbytes`` > 0 allocates that many bytes under ``key``,
    ``nbytes`` < 0 frees what ``key`` holds (its magnitude is not used), 0 does nothing (torch
    allocates nothing for an empty tensor). A key must not be allocated twice before its free.
    An allocation that does not fit ``settings.capacity_bytes`` is recorded in ``ooms`` and
    takes no memory (its later free is ignored).
    """
    model = CachingAllocator(settings)
    held: dict[Hashable, int] = {}
    for key, nbytes in actions:
        if nbytes > 0:
            if key in held:
                raise ValueError(f"simulate: {key!r} is allocated twice without a free")
            placed = model.malloc(int(nbytes), stream)
            if placed is not None:
                held[key] = placed[0]
        elif nbytes < 0:
            addr = held.pop(key, None)
            if addr is not None:
                model.free(addr)
    return _simulation(model)


def _simulation(model: CachingAllocator) -> Simulation:
    return Simulation(
        settings=model.settings.describe(),
        allocated_peak_bytes=model.allocated_peak_bytes,
        requested_peak_bytes=model.requested_peak_bytes,
        reserved_peak_bytes=model.reserved_peak_bytes,
        reserve_overhead_bytes=model.reserved_peak_bytes - model.allocated_peak_bytes,
        allocated_bytes=model.allocated_bytes,
        reserved_bytes=model.reserved_bytes,
        segments=model.segments,
        segment_allocations=sum(1 for kind, _, _ in model.segment_log if kind in _GROWS),
        largest_free_block_bytes=model.largest_free_block(),
        ooms=tuple(model.ooms),
    )


_GROWS = ("segment_alloc", "segment_map")
