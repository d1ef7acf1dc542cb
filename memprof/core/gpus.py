"""Common cards' memory, for ``memprof.estimate(gpu=NAME)`` (and the command's option): what an
estimate is checked against.

Each figure says what it is (``kind``):

- ``reported``: the total memory CUDA (or ROCm) reports for the card, ``totalGlobalMem``, which
  is ``torch.cuda.get_device_properties(i).total_memory``, as recorded on a real card (a trace's
  ``deviceProperties``, ``deviceQuery``'s output);
- ``nvidia-smi``: the ``memory.total`` nvidia-smi shows for the card (where no recording of
  ``totalGlobalMem`` was at hand); it runs somewhat above ``totalGlobalMem`` (on an H100 80GB
  HBM3, 81,559 MiB against 81,080 MiB: 0.6%);
- ``nominal``: the vendor's capacity in GiB, for cards with neither; the reported total runs
  below it (a "32 GB" V100 reports 31.75 GiB).

No figure is what PyTorch can use: the CUDA context, the libraries' handles and workspaces
(cuBLAS, cuDNN, NCCL) and other processes take part of the card first, outside the caching
allocator. An estimate keeps a reserve for them (:func:`reserve_of`): ``Gpu.reserve_bytes`` where
it was measured on that card, else :data:`DEFAULT_CUDA_RESERVE_BYTES`; ``--reserve`` sets it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memprof.core.errors import UsageError, param

DEFAULT_CUDA_RESERVE_BYTES = 1 << 30
"""What an estimate keeps free of a CUDA card for memory outside the caching allocator when no
figure was measured on that card: 1 GiB. It is an allowance, not a measurement: a CUDA context
takes a few hundred MiB (more with eager module loading), cuBLAS and cuDNN their handles and
workspaces, NCCL its buffers, and none of it is a tensor the estimate sees."""


@dataclass(frozen=True)
class Gpu:
    """One card: the name memprof knows it by, the card's own name, its memory (bytes), what that
    figure is (see the module docstring) and where it comes from; ``reserve_bytes``, the memory
    measured outside the caching allocator on that card (None: not measured, the default
    reserve applies)."""

    key: str
    name: str
    memory_bytes: int
    kind: str
    source: str
    aliases: tuple[str, ...] = ()
    reserve_bytes: int | None = None


def reserve_of(gpu: Gpu | None, device: str) -> int:
    """The reserve an estimate keeps by default: on CUDA, the card's measured figure or
    :data:`DEFAULT_CUDA_RESERVE_BYTES`; on the CPU, nothing."""
    if device != "cuda":
        return 0
    if gpu is not None and gpu.reserve_bytes is not None:
        return gpu.reserve_bytes
    return DEFAULT_CUDA_RESERVE_BYTES


GPUS: tuple[Gpu, ...] = (
    Gpu("a100-40gb", "NVIDIA A100-SXM4-40GB", 42_298_834_944, "reported",
        "deviceQuery output quoted in bottlerocket-os/bottlerocket pull request 3873", ("a100-40",)),
    Gpu("a100-80gb", "NVIDIA A100 80GB PCIe", 84_987_740_160, "reported",
        "deviceProperties of a torch.profiler trace, CodingPlatelets/SwitchTransformers trace.json",
        ("a100", "a100-80")),
    Gpu("h100", "NVIDIA H100 80GB HBM3", 85_018_279_936, "reported",
        "deviceProperties of a torch.profiler trace, AMD-AGI/TraceLens tests/traces/h100", ("h100-80gb",)),
    Gpu("h200", "NVIDIA H200", 150_754_820_096, "nvidia-smi",
        "nvidia-smi, 143,771 MiB, quoted in NVIDIA/cuda-samples issue 311 (141 GB nominal)", ("h200-141gb",)),
    Gpu("l4", "NVIDIA L4", 24_152_899_584, "nvidia-smi",
        "nvidia-smi, 23,034 MiB, listed in modal-labs/modal-client pull request 2797"),
    Gpu("a10", "NVIDIA A10", 24_146_608_128, "nvidia-smi",
        "nvidia-smi, 23,028 MiB, listed in modal-labs/modal-client pull request 2797", ("a10g",)),
    Gpu("t4", "Tesla T4", 15_843_721_216, "reported",
        "deviceQuery output, chiemon.github.io/2024/12/25 (15,110 MiB)"),
    Gpu("v100-16gb", "Tesla V100 16GB", 17_179_869_184, "nominal", "NVIDIA's V100 datasheet: 16 GB HBM2",
        ("v100-16",)),
    Gpu("v100-32gb", "Tesla V100-SXM2-32GB", 34_089_730_048, "reported",
        "deviceProperties of a torch.profiler trace, facebookresearch/HolisticTraceAnalysis tests/data",
        ("v100", "v100-32")),
    Gpu("rtx4090", "NVIDIA GeForce RTX 4090", 25_769_803_776, "nominal",
        "NVIDIA's RTX 4090 specifications: 24 GB GDDR6X", ("4090", "rtx-4090")),
    Gpu("rtx5080", "NVIDIA GeForce RTX 5080", 16_567_697_408, "reported",
        "deviceProperties of a torch.profiler trace, leimao/PyTorch-CUDA-Graph-Capture-Examples", ("5080",)),
    Gpu("mi300x", "AMD Instinct MI300X VF", 205_571_227_648, "reported",
        "deviceProperties of a torch.profiler trace, AMD-AGI/TraceLens tests/traces/mi300"),
)  # fmt: skip


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def find_gpu(name: str) -> Gpu:
    """The card ``name`` names (case, spaces and dashes ignored: ``H100``, ``a100-80gb``,
    ``RTX 4090``); :class:`UsageError` (exit 2) listing the names otherwise."""
    wanted = _normal(name)
    for gpu in GPUS:
        if wanted in {_normal(n) for n in (gpu.key, *gpu.aliases)}:
            return gpu
    known = ", ".join(gpu.key for gpu in GPUS)
    raise UsageError(
        f"{param('gpu')} {name!r} is not a card memprof knows; it knows {known} "
        f"(or give the memory itself with {param('capacity')})"
    )


def gpu_table() -> str:
    """The table of every card: name, memory (GiB and bytes), what the figure is, source."""
    from memprof.core.units import format_bytes

    rows = [("name", "card", "memory", "bytes", "figure", "source")]
    for gpu in GPUS:
        rows.append(
            (gpu.key, gpu.name, format_bytes(gpu.memory_bytes), f"{gpu.memory_bytes:,}", gpu.kind, gpu.source)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[5]
             for row in rows]  # fmt: skip
    return "\n".join(line.rstrip() for line in lines) + "\n"
