"""Every command-line option, declared once, and the option groups commands take.

A command declares an option group as one parameter, ``output: OutputOptions``;
:func:`memprof.frontends.commands.groups.with_option_groups` (applied to every command by
``memprof.frontends.cli``) spreads the group's fields into the command line's options and
builds the group back, once, before the command runs. An option a few commands take alone is
one shared type here (``warmup: Warmup = 1``). A new command that profiles, writes reports
and gates says so in one line per group::

    def estimate(
        target: Target, *, profile: ProfileOptions, output: OutputOptions, gate: GateOptions
    ) -> None:
        \"\"\"Its --help text.\"\"\"

Importing it loads neither torch nor pandas.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import typer

from memprof.analysis.gate import DEFAULT_TOLERANCE
from memprof.core.errors import UsageError
from memprof.frontends.commands.groups import OptionGroup
from memprof.sources.options import DEFAULT_RANK_TIMEOUT

if TYPE_CHECKING:
    from memprof.analysis.gate import GateConfig


class Sort(str, Enum):
    peak = "peak"
    self = "self"
    allocated = "allocated"


class Mode(str, Enum):
    eager = "eager"
    compile = "compile"


class EstimateDevice(str, Enum):
    cuda = "cuda"
    cpu = "cpu"


class CompileMode(str, Enum):
    default = "default"
    reduce_overhead = "reduce-overhead"
    max_autotune = "max-autotune"
    max_autotune_no_cudagraphs = "max-autotune-no-cudagraphs"


# ---------------------------------------------------------------------------- the options

# The groups --help shows options in (typer's help panels), in this order.
TARGET_PANEL = "Target and inputs"
RUNS_PANEL = "Runs"
REPORTS_PANEL = "Reports"
GATES_PANEL = "Gates"
DISTRIBUTED_PANEL = "Distributed"
FIT_PANEL = "Device and memory"


def _file(flag: str, help: str, panel: str = REPORTS_PANEL) -> Any:
    """An option naming a file (a folder there is a usage error)."""
    return typer.Option(flag, help=help, parser=_file_path, metavar="<file>", rich_help_panel=panel)


def _file_path(text: str) -> Path:
    # A Path forgets a trailing "/": "--json out/" would write a file named "out".
    if text.endswith(("/", os.sep)) or _is_dir(text):
        raise typer.BadParameter(f"{text!r} is a folder; give a file name")
    return Path(text)


def _is_dir(text: str) -> bool:
    try:
        return Path(text).is_dir()
    except (OSError, ValueError):  # a name too long, a NUL: the writer or reader says so, once
        return False


def _switch(*flags: str, help: str, panel: str) -> Any:
    """An option that is on or off, in ``panel`` of --help."""
    return typer.Option(*flags, help=help, rich_help_panel=panel)


def _folder(flag: str, help: str) -> Any:
    """An option naming a folder."""
    return typer.Option(flag, help=help, file_okay=False, rich_help_panel=REPORTS_PANEL)


Target = Annotated[
    str,
    typer.Argument(
        metavar="TARGET",
        help="What to profile: pkg.module:function, pkg.module:obj.attr or path/to/file.py:function.",
    ),
]
Inputs = Annotated[
    str | None,
    typer.Option(
        "--inputs",
        help="Factory of the arguments (as TARGET). Default: <function>_inputs.",
        rich_help_panel=TARGET_PANEL,
    ),
]
Device = Annotated[
    str,
    typer.Option(
        "--device",
        help="auto (CUDA if available), cpu, cuda, cuda:N.",
        show_default=False,
        rich_help_panel=RUNS_PANEL,
    ),
]
ModeOption = Annotated[
    Mode,
    typer.Option(
        "--mode",
        metavar="MODE",
        help="eager, or compile (torch.compile, compiled before profiling).",
        rich_help_panel=RUNS_PANEL,
    ),
]
CompileModeOption = Annotated[
    CompileMode,
    typer.Option(
        "--compile-mode",
        metavar="MODE",
        help="torch.compile's mode (default, max-autotune, ...).",
        show_default=False,
        rich_help_panel=RUNS_PANEL,
    ),
]
Backend = Annotated[
    str,
    typer.Option(
        "--backend",
        help="torch.compile's backend (inductor).",
        show_default=False,
        rich_help_panel=RUNS_PANEL,
    ),
]
Warmup = Annotated[
    int,
    typer.Option(
        "--warmup",
        min=0,
        help="Calls first, not measured (default 1).",
        show_default=False,
        rich_help_panel=RUNS_PANEL,
    ),
]
Repeat = Annotated[
    int,
    typer.Option(
        "--repeat",
        min=1,
        help="Profiled calls (default 1); the highest peak.",
        show_default=False,
        rich_help_panel=RUNS_PANEL,
    ),
]
TimeBudget = Annotated[
    float,
    typer.Option(
        "--time-budget",
        min=0,
        metavar="SECONDS",
        help="Time calls unprofiled this long (0.2; 0: off).",
        show_default=False,
        rich_help_panel=RUNS_PANEL,
    ),
]
FreshCompile = Annotated[
    bool, _switch("--fresh-compile", help="Compile cold, not from Inductor's cache.", panel=RUNS_PANEL)
]
Timeout = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=0.001,
        metavar="SECONDS",
        help="Stop the code after this long (exit 3).",
        rich_help_panel=RUNS_PANEL,
    ),
]
ExplainAnyway = Annotated[
    bool,
    typer.Option(
        "--explain", hidden=True, help="Explain each peak (the default; kept for scripts that say so)."
    ),
]
NoExplain = Annotated[
    bool, _switch("--no-explain", help="Numbers only: no category, module, line.", panel=RUNS_PANEL)
]
JsonPath = Annotated[Path | None, _file("--json", "The report as JSON (also a baseline).")]
CsvPath = Annotated[Path | None, _file("--csv", "Per-op numbers as CSV.")]
AtPeakCsvPath = Annotated[Path | None, _file("--at-peak-csv", "What is live at each peak as CSV.")]
ExactCsv = Annotated[
    bool, _switch("--exact-csv", help="CSV text as is (no ' before =, +, -, @).", panel=REPORTS_PANEL)
]
MarkdownPath = Annotated[Path | None, _file("--markdown", "A Markdown summary (CI step summaries).")]
HtmlPath = Annotated[Path | None, _file("--html", "A self-contained HTML report.")]
OutDir = Annotated[
    Path | None,
    _folder("--out", "Every format into this folder."),
]
TablePath = Annotated[Path | None, _file("--table", "torch's own printed table of each run.")]
SortOption = Annotated[
    Sort,
    typer.Option(
        "--sort",
        metavar="KEY",
        help="Order ops by peak, self or allocated.",
        show_default=False,
        rich_help_panel=REPORTS_PANEL,
    ),
]
Top = Annotated[
    int | None,
    typer.Option(
        "--top",
        min=1,
        help="Ops shown (default 5; 15 with --full).",
        show_default=False,
        rich_help_panel=REPORTS_PANEL,
    ),
]
Full = Annotated[bool, _switch("--full", help="The whole report, not the short one.", panel=REPORTS_PANEL)]
OpChains = Annotated[
    bool, _switch("--op-chains", help="Show the wrappers folded into each op.", panel=REPORTS_PANEL)
]
Quiet = Annotated[bool, _switch("-q", "--quiet", help="No status lines on stderr.", panel=REPORTS_PANEL)]
GroupModules = Annotated[
    list[str] | None,
    typer.Option(
        "--group-modules",
        metavar="GROUPING",
        help="Group modules: class, or path patterns.",
        rich_help_panel=REPORTS_PANEL,
    ),
]
RankOption = Annotated[
    int | None,
    typer.Option(
        "--rank",
        min=0,
        help="The rank shown in detail (the highest).",
        rich_help_panel=REPORTS_PANEL,
    ),
]
NprocPerNode = Annotated[
    int | None,
    typer.Option(
        "--nproc-per-node",
        min=1,
        metavar="N",
        help="Start N ranks here, as torchrun does.",
        rich_help_panel=DISTRIBUTED_PANEL,
    ),
]
RankTimeout = Annotated[
    float,
    typer.Option(
        "--rank-timeout",
        min=0.1,
        metavar="SECONDS",
        help="How long ranks wait for each other (300).",
        show_default=False,
        rich_help_panel=DISTRIBUTED_PANEL,
    ),
]
Verbose = Annotated[
    bool, _switch("-v", "--verbose", help="Show torch's own warnings and logs.", panel=REPORTS_PANEL)
]
Budget = Annotated[
    str | None,
    typer.Option(
        "--budget",
        metavar="SIZE",
        help="Fail above this peak: 800MB, eager=1GB,...",
        rich_help_panel=GATES_PANEL,
    ),
]
Baseline = Annotated[
    Path | None,
    _file(
        "--baseline",
        "Fail when a peak grew over this report's.",
        GATES_PANEL,
    ),
]
Tolerance = Annotated[
    str,
    typer.Option(
        "--tolerance",
        help="Growth allowed (default 5%).",
        show_default=False,
        rich_help_panel=GATES_PANEL,
    ),
]
PerOp = Annotated[bool, _switch("--per-op", help="Also gate each op's peak.", panel=GATES_PANEL)]
StrictEnv = Annotated[
    bool, _switch("--strict-env", help="Another device or torch: exit 2.", panel=GATES_PANEL)
]
RequireCompileSaves = Annotated[
    bool, _switch("--require-compile-saves", help="Fail when compile does not save.", panel=GATES_PANEL)
]
SaveBaseline = Annotated[
    Path | None,
    _file(
        "--save-baseline",
        "Write a baseline for --baseline.",
        GATES_PANEL,
    ),
]


def _gpu_help() -> str:
    from memprof.core.gpus import GPUS

    return "A card to fit (exit 1 if not): " + ", ".join(gpu.key for gpu in GPUS) + "; list: their figures."


FitDevice = Annotated[
    EstimateDevice,
    typer.Option(
        "--device",
        help="Allocator modelled: cuda (no GPU needed) or cpu.",
        show_default=False,
        rich_help_panel=FIT_PANEL,
    ),
]
Capacity = Annotated[
    str | None,
    typer.Option(
        "--capacity",
        metavar="SIZE",
        help="Does it fit in this, e.g. 24GB (exit 1 if not).",
        rich_help_panel=FIT_PANEL,
    ),
]
Gpu = Annotated[
    str | None, typer.Option("--gpu", metavar="NAME", help=_gpu_help(), rich_help_panel=FIT_PANEL)
]
Reserve = Annotated[
    str | None,
    typer.Option(
        "--reserve",
        metavar="SIZE",
        help="Kept free of it (CUDA context, NCCL): a --gpu's 1GB.",
        rich_help_panel=FIT_PANEL,
    ),
]


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="NAME=VALUE",
        help="A keyword of the inputs factory (repeatable).",
        rich_help_panel=TARGET_PANEL,
    ),
]


# ---------------------------------------------------------------------------- option groups


@dataclass(frozen=True)
class ProfileOptions(OptionGroup):
    """How each target is profiled (the arguments of :func:`memprof.compare`)."""

    device: Device = "auto"
    compile_mode: CompileModeOption = CompileMode.default
    backend: Backend = "inductor"
    warmup: Warmup = 1
    repeat: Repeat = 1
    time_budget: TimeBudget = 0.2
    fresh_compile: FreshCompile = False
    no_explain: NoExplain = False
    explain: ExplainAnyway = False
    timeout: Timeout = None

    def api_arguments(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "warmup": self.warmup,
            "repeat": self.repeat,
            "time_budget": self.time_budget,
            "compile_mode": self.compile_mode.value,
            "backend": self.backend,
            "fresh_compile": self.fresh_compile,
            "explain": self.explain or not self.no_explain,
            "timeout": self.timeout,
        }


class Writing(TypedDict):
    """``write_outputs``' keywords that the output options decide."""

    exact_csv: bool
    quiet: bool


@dataclass(frozen=True)
class OutputOptions(OptionGroup):
    """Where the report goes (files by format), and how the terminal shows it."""

    json_path: JsonPath = None
    csv_path: CsvPath = None
    at_peak_csv_path: AtPeakCsvPath = None
    exact_csv: ExactCsv = False
    markdown_path: MarkdownPath = None
    html_path: HtmlPath = None
    out_dir: OutDir = None
    table_path: TablePath = None
    sort: SortOption = Sort.peak
    top: Top = None
    full: Full = False
    op_chains: OpChains = False
    quiet: Quiet = False
    verbose: Verbose = False
    rank: RankOption = None
    group_modules: GroupModules = None

    def __post_init__(self) -> None:
        if self.group_modules:  # a bad --group-modules is exit 2 before anything runs
            from memprof.library.api import module_grouping

            module_grouping(self.group_modules)

    @property
    def writing(self) -> Writing:
        """How files are written and said (``write_outputs``' keywords): CSV text as it is or
        made safe for spreadsheets, and whether the files written are named on stderr."""
        return Writing(exact_csv=self.exact_csv, quiet=self.quiet)

    def files(
        self, save_baseline: Path | None = None, reads: Sequence[tuple[str, Path | None]] = ()
    ) -> dict[str, Path]:
        """Each file to write, by format (``table``: torch's tables; ``baseline``: the JSON
        again), checked before anything runs: a bad path, or one that is among the files the
        run ``reads`` (``(what, path)``: the target's source, the baseline), fails at once with
        exit 2. Paths are made absolute here, once: code that changes the working folder while
        it runs does not move the outputs."""
        from memprof.core.writing import absolute, check_output_paths
        from memprof.outputs import STANDARD_NAMES

        chosen = {
            "json": self.json_path,
            "csv": self.csv_path,
            "at_peak_csv": self.at_peak_csv_path,
            "markdown": self.markdown_path,
            "html": self.html_path,
        }
        if self.out_dir is not None:
            _make_folder(self.out_dir)
            for fmt, name in STANDARD_NAMES.items():
                if chosen[fmt] is None:
                    chosen[fmt] = self.out_dir / name
        files = {fmt: path for fmt, path in chosen.items() if path is not None}
        if self.table_path is not None:
            files["table"] = self.table_path
        if save_baseline is not None and not (
            # realpath: Path.resolve raises on a loop of links, which the checks below name
            "json" in files and os.path.realpath(files["json"]) == os.path.realpath(save_baseline)
        ):
            files["baseline"] = save_baseline  # --json and --save-baseline naming one file: written once
        flags = {"table": "--table", "baseline": "--save-baseline", "at_peak_csv": "--at-peak-csv"}
        check_output_paths(((flags.get(fmt, f"--{fmt}"), path) for fmt, path in files.items()), reads)
        files = {fmt: absolute(path) for fmt, path in files.items()}
        return files


def _make_folder(folder: Path) -> None:
    """``--out DIR``: the folder, made (with its parents) when it does not exist yet."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {str(folder)!r} is a file; name a folder for the reports")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(
            f"--out {str(folder)!r}: cannot create the folder ({error.strerror or error})"
        ) from None


@dataclass(frozen=True)
class FactoryOptions(OptionGroup):
    """Keyword arguments for the inputs factory, from the command line."""

    inputs_kwargs: SetOption = None

    def params(self) -> dict[str, Any]:
        """``--set batch=8 --set seq=2048`` -> ``{"batch": 8, "seq": 2048}``; a malformed or
        repeated name is exit 2."""
        params: dict[str, Any] = {}
        for text in self.inputs_kwargs or ():
            name, value = parse_assignment(text, "--set")
            if name in params:
                raise UsageError(f"--set {name} is given twice; give each parameter once")
            params[name] = value
        return params


def parse_assignment(text: str, flag: str) -> tuple[str, Any]:
    """``NAME=VALUE`` -> (name, parsed value); exit 2 naming ``flag`` otherwise."""
    from memprof.sources.targets.target import parse_value

    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(f"{flag} {text!r} is not NAME=VALUE; write it like {flag} batch=8")
    return name, parse_value(value)


@dataclass(frozen=True)
class FitOptions(OptionGroup):
    """The device an estimate models and the memory it must fit in (``estimate``, ``advise``)."""

    device: FitDevice = EstimateDevice.cuda
    capacity: Capacity = None
    gpu: Gpu = None
    reserve: Reserve = None

    @property
    def lists_gpus(self) -> bool:
        """``--gpu list``: print the cards memprof knows instead."""
        return self.gpu is not None and self.gpu.strip().lower() == "list"

    def api_arguments(self) -> dict[str, Any]:
        """As :func:`memprof.estimate` and :func:`memprof.advise` take them."""
        return {
            "device": self.device.value,
            "capacity": self.capacity,
            "gpu": self.gpu,
            "reserve": self.reserve,
        }


@dataclass(frozen=True)
class DistributedOptions(OptionGroup):
    """Profiling every rank of a torch.distributed job: start one here, or wait for its ranks."""

    nproc_per_node: NprocPerNode = None
    rank_timeout: RankTimeout = DEFAULT_RANK_TIMEOUT


@dataclass(frozen=True)
class GateOptions(OptionGroup):
    """The memory gate: budgets, a baseline with a tolerance, compiled vs eager."""

    budget: Budget = None
    baseline: Baseline = None
    tolerance: Tolerance = f"{DEFAULT_TOLERANCE * 100:g}%"
    per_op: PerOp = False
    strict_env: StrictEnv = False
    require_compile_saves: RequireCompileSaves = False

    def config(self) -> GateConfig:
        """The gate parsed and the baseline loaded; any problem is exit 2 right here (before
        any profiling)."""
        from memprof.analysis.gate import GateConfig, parse_budget
        from memprof.core.units import parse_percent

        if self.per_op and self.baseline is None:
            raise UsageError("--per-op compares each op with a baseline; give --baseline BASE.json too")
        baseline_report = None
        if self.baseline is not None:
            from memprof.pipeline import load_report

            baseline_report = load_report(self.baseline)
        try:
            fraction = parse_percent(self.tolerance)
        except UsageError as error:
            raise UsageError(f"--tolerance: {error.message}") from None
        return GateConfig(
            budgets=parse_budget(self.budget),
            baseline=baseline_report,
            tolerance=fraction,
            per_op=self.per_op,
            require_compile_saves=self.require_compile_saves,
            strict_env=self.strict_env,
        )
