"""What the commands share: status and error lines, writing the reports, printing the gate, and
the profile-and-report flow of ``run`` and ``compare`` (:func:`profile_and_report`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from memprof.core.errors import GateFailed, MemprofError, UserCodeError

if TYPE_CHECKING:
    from memprof.analysis.gate import GateConfig, GateResult
    from memprof.frontends.commands.options import FactoryOptions, FitOptions, OutputOptions, ProfileOptions
    from memprof.library.api import Variant
    from memprof.model.report import Report


MESSAGE_LIMIT = 2000
"""The most characters of one line memprof prints on stderr (a message quotes its inputs cut
short already; this bounds the line whatever it quotes)."""


def err(message: str) -> None:
    """Print one line to stderr: control and invisible characters, line breaks included,
    escaped, and cut to :data:`MESSAGE_LIMIT` characters."""
    from memprof.core.text import one_line
    from memprof.frontends.commands.status import clear_status

    clear_status()
    typer.echo(one_line(message, MESSAGE_LIMIT), err=True)


def err_lines(text: str) -> None:
    """Print lines to stderr as they are (a user's traceback, already cut to size), with
    control and invisible characters escaped."""
    from memprof.core.text import visible
    from memprof.frontends.commands.status import clear_status

    clear_status()
    typer.echo(visible(text), err=True)


def out(text: str, nl: bool = True) -> None:
    """Print to stdout, with control and invisible characters from names escaped."""
    from memprof.core.text import visible

    typer.echo(visible(text), nl=nl)


def read_inputs(specs: Sequence[str | None], baseline: Path | None) -> list[tuple[str, Path | None]]:
    """The files a run reads that no output may replace: each target's and inputs factory's
    source file (found without running it) and the baseline."""
    from memprof.sources.targets.target import spec_file

    files: list[tuple[str, Path | None]] = [
        ("the source file of " + repr(spec), spec_file(spec)) for spec in dict.fromkeys(specs) if spec
    ]
    return [*files, ("the baseline", baseline)]


def status_printer(quiet: bool) -> Callable[[str], None] | None:
    """Status lines on stderr (``memprof: compiling … 5 s``: in place on a terminal, one line per
    step otherwise, each within the width; :mod:`memprof.frontends.commands.status`), or None with ``-q``."""
    if quiet:
        return None
    from memprof.frontends.commands.status import status_line

    return status_line()


def gpus_listed(fit: FitOptions) -> bool:
    """``--gpu list`` (``estimate``, ``advise``): the cards memprof knows printed instead of an
    answer; true when they were."""
    if not fit.lists_gpus:
        return False
    from memprof.core.gpus import gpu_table

    typer.echo(gpu_table(), nl=False)
    return True


def fake_run_arguments(fit: FitOptions, factory: FactoryOptions, output: OutputOptions) -> dict[str, Any]:
    """The keywords of :func:`memprof.estimate` and :func:`memprof.advise` that their commands'
    option groups decide: the device and memory to fit, the inputs factory's keywords (a bad
    ``--set`` is exit 2), and the status lines."""
    return {**fit.api_arguments(), "inputs_kwargs": factory.params(), "status": status_printer(output.quiet)}


def print_report(report: Report, output: OutputOptions, rank: int | None = None) -> None:
    """The terminal summary on stdout, the status line cleared first."""
    from memprof.frontends.commands.status import clear_status
    from memprof.outputs.terminal import print_terminal

    clear_status()
    print_terminal(
        report, sort=output.sort.value, top=output.top, rank=rank, chains=output.op_chains, full=output.full
    )


def hidden_line(count: int, examples: Sequence[tuple[str, int]] = (), width: int = 100) -> str | None:
    """``12 torch warnings hidden (Profiler record function ... will be ignored x12); -v shows
    them``, within ``width`` characters after ``memprof: `` (the example cut to fit), or None
    when nothing was hidden."""
    if count <= 0:
        return None
    what = "torch warning" if count == 1 else "torch warnings"
    line = f"{count} {what} hidden; -v shows them"
    if not examples:
        return line
    text, times = examples[0]
    after = f"{f' x{times}' if times > 1 else ''}{', ...' if len(examples) > 1 else ''})"
    room = min(70, width - len("memprof: ") - len(line) - len(after) - 2)
    if room < 12:
        return line
    text = text if len(text) <= room else text[: room - 1] + "…"
    return f"{count} {what} hidden ({text}{after}; -v shows them"


def stderr_width() -> int:
    """The width of stderr's lines: ``COLUMNS``, else the terminal's, else 100."""
    from memprof.outputs.layout import terminal_width

    return terminal_width(sys.stderr)


def report_hidden(report: Report) -> None:
    """Say on stderr how many of torch's messages were kept out of the output."""
    from collections import Counter

    heard: Counter[str] = Counter()
    for run in report.runs.values():
        for text, times in run.torch_messages:
            heard[text] += times
    line = hidden_line(sum(heard.values()), heard.most_common(), stderr_width())
    if line:
        err(f"memprof: {line}")


def write_outputs(
    report: Report,
    files: dict[str, Path],
    *,
    rank: int | None = None,
    gate: GateResult | None = None,
    exact_csv: bool = False,
    quiet: bool = False,
    show: Callable[[], None] | None = None,
) -> None:
    """Render every requested format first, then write them all or none (see
    :func:`memprof.core.writing.atomic_write_all`): a rendering or writing error leaves no file
    behind; then say on stderr which files were written (``memprof: wrote report.html``),
    unless ``quiet``, and only then ``show`` the terminal report, so that its answer is the
    last thing printed (when writing fails, the report is shown before the error). ``baseline``
    is the JSON report under another name. ``rank``: the rank a report of several ranks details
    (Markdown, HTML); ``gate``: the gate's result, which the Markdown summary shows first;
    ``exact_csv``: CSV text cells as they are (see :func:`memprof.core.text.spreadsheet_safe`)."""
    from memprof.core.writing import atomic_write_texts
    from memprof.outputs import renderer

    try:
        rendered = {
            path: renderer("json" if fmt == "baseline" else fmt, rank=rank, gate=gate, exact_csv=exact_csv)(
                report
            )
            for fmt, path in files.items()
        }
        atomic_write_texts(list(rendered.items()))
    except MemprofError:
        if show is not None:
            show()
        raise
    if rendered and not quiet:
        import textwrap

        names = ", ".join(dict.fromkeys(shown_path(path) for path in rendered))
        # Wrapped to the width between names, a path never cut (one longer than the line is whole).
        said = f"memprof: wrote {names}"
        wrapped = textwrap.wrap(
            said, stderr_width(), subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
        for line in wrapped:
            err(line)
    if show is not None:
        show()


def shown_path(path: Path) -> str:
    """A path as a user reads it: relative to the working directory when inside it."""
    import os

    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return str(path) if relative.startswith("..") else relative


def write_and_gate(
    report: Report,
    files: dict[str, Path],
    config: GateConfig,
    *,
    rank: int | None = None,
    gated: Report | None = None,
    exact_csv: bool = False,
    quiet: bool = False,
    show: Callable[[], None] | None = None,
) -> None:
    """Apply the gate (when active) to ``gated`` (default: ``report``), write ``report``'s files
    (the Markdown summary with the gate's verdict; ``quiet``: without saying so), ``show`` the
    terminal report, then print the gate's lines and raise :class:`GateFailed` when it failed.
    A gate that cannot be applied (exit 2) is raised after the files are written."""
    result, problem = None, None
    if config.active:
        from memprof.analysis.gate import evaluate

        try:
            result = evaluate(gated or report, config)
        except MemprofError as error:
            problem = error
    write_outputs(report, files, rank=rank, gate=result, exact_csv=exact_csv, quiet=quiet, show=show)
    if problem is not None:
        raise problem
    if result is not None:
        report_gate(result)


def report_gate(result: GateResult) -> None:
    """Print the gate's lines on stdout (they belong in CI logs, next to the report): one line
    each in a log, wrapped to the width on a terminal or with ``COLUMNS``; raise
    :class:`GateFailed` (exit 1) when a check failed."""
    from memprof.outputs.gate import gate_lines

    print_gate_lines(gate_lines(result))
    if not result.passed:
        raise GateFailed(result.summary())


def print_gate_lines(lines: Sequence[str]) -> None:
    """The gate's lines on stdout. Each verdict is one line, whatever its labels hold: so it
    stays in a log (grep finds it whole); on a terminal or with ``COLUMNS``, wrapped to the
    width (its indent kept, later lines indented two more spaces)."""
    from memprof.core.text import one_line
    from memprof.outputs.layout import known_width, wrap

    width = known_width()
    for line in lines:
        text = one_line(line, MESSAGE_LIMIT)
        if width is None:
            out(text)
            continue
        indent = text[: len(text) - len(text.lstrip(" "))]
        for row in wrap(text.lstrip(" "), width, indent=indent, hanging=indent + "  "):
            out(row)


def profile_and_report(
    variants: Sequence[Variant],
    labels: Sequence[str] | None,
    files: dict[str, Path],
    gate: GateConfig,
    profile: ProfileOptions,
    output: OutputOptions,
) -> Report:
    """Profile (:func:`memprof.compare`), write the files, print the terminal summary, then
    gate. When a target's code fails, what was measured is still printed and written before
    its error (exit 3) is raised, and no gate is applied."""
    from memprof.core.gcpause import start_up_imports
    from memprof.core.interpreter import kept_from_user_code

    with start_up_imports():
        import memprof.sources.live.run  # noqa: F401 - torch and the profiler, with the rest of memprof
        from memprof.library.api import compare

    try:
        with kept_from_user_code():  # then the report is printed and written as if it had not run
            report = compare(
                *variants,
                labels=labels,
                # torch's key_averages() table costs more than memprof's whole analysis: made only
                # when --table asks for it (the HTML report embeds it then too).
                keep_table="table" in files,
                status=status_printer(output.quiet),
                verbose=output.verbose,
                group_modules=output.group_modules,
                **profile.api_arguments(),
            )
        failure = None
    except UserCodeError as error:
        if error.report is None:
            raise
        report, failure = error.report, error
    if not output.quiet:
        report_hidden(report)

    def show() -> None:
        print_report(report, output)

    if failure is None:
        write_and_gate(report, files, gate, **output.writing, show=show)
        return report
    try:
        write_outputs(report, files, **output.writing, show=show)
    except MemprofError as error:
        err(f"memprof: error: {error.message}")  # then the code's own failure, exit 3
    raise failure
