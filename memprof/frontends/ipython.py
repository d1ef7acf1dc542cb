"""Notebook magics: ``%load_ext memprof``, then ``%%memprof [options]`` profiles a cell and
``%memprof [options] statement`` one line, each shown as the HTML report (in a terminal
IPython, as one summary line).

The cell runs once, as :func:`memprof.track` runs a block: the peak above the cell's start,
what is live at it (the notebook's variables are the roots: models, optimizers and tensors
they hold are recognised), no warm-up. The value of the cell's last expression is returned
(and shown) after the report, and the report is kept as ``_memprof_report``. Options::

    --json PATH / --html PATH / --markdown PATH   write the report (all or none)
    --device DEVICE    auto (default), cpu, cuda, cuda:N: whose allocator is measured
    --no-explain       the numbers only, not what is live at the peak
    --label NAME       the run's label (default: cell)
    --quiet            show no report (files are still written)

Imported by ``%load_ext memprof`` (``memprof.load_ipython_extension``), with IPython.
"""

from __future__ import annotations

import ast
from typing import Any

from IPython.core.error import UsageError as IPythonUsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from memprof.core.errors import NO_VALUE, MemprofError, spelled_as
from memprof.frontends.display import register as register_display
from memprof.library.blocks import Tracking, namespace_roots

REPORT_NAME = "_memprof_report"
"""The notebook variable that holds the last report."""

_FLAGS = {name: f"--{name}" for name in ("json", "html", "markdown", "device", "label")}


def _spelling(name: str, value: Any = NO_VALUE) -> str | None:
    """Parameters as the magic's options (``--json PATH``); None for those it lacks."""
    if name == "explain":
        return "--no-explain"
    flag = _FLAGS.get(name)
    return flag if flag is None or value is NO_VALUE else f"{flag} {value}"


@magics_class
class MemprofMagics(Magics):  # type: ignore[misc]
    """``%memprof`` and ``%%memprof``."""

    @property
    def _shell(self) -> Any:
        """The shell the magics were registered with (set once loaded)."""
        return self.shell

    @magic_arguments()  # type: ignore[misc]
    @argument("--json", metavar="PATH", help="Write the report as JSON.")  # type: ignore[misc]
    @argument("--html", metavar="PATH", help="Write the report as HTML.")  # type: ignore[misc]
    @argument("--markdown", metavar="PATH", help="Write the report as Markdown.")  # type: ignore[misc]
    @argument("--device", default=None, help="auto (default), cpu, cuda or cuda:N.")  # type: ignore[misc]
    @argument("--no-explain", action="store_true", help="Numbers only.")  # type: ignore[misc]
    @argument("--label", default=None, help="The run's label (default: cell).")  # type: ignore[misc]
    @argument("--quiet", action="store_true", help="Show no report.")  # type: ignore[misc]
    @line_cell_magic  # type: ignore[misc]
    def memprof(self, line: str, cell: str | None = None) -> Any:
        """Profile a cell's (``%%memprof``) or a line's (``%memprof``) memory and show the
        report: peak above the start, footprint, what is live at the peak."""
        args, extra = parse_argstring(self.memprof, line, partial=True)
        if cell is not None and extra:
            raise IPythonUsageError(f"%%memprof: unknown option(s) {' '.join(extra)}; see %%memprof?")
        source = cell if cell is not None else " ".join(extra)
        if not source.strip():
            raise IPythonUsageError(
                "%memprof needs a statement to profile (%memprof y = f(x)); %%memprof profiles a cell"
            )
        body, last = self._compiled(source)
        shell = self._shell
        try:
            with spelled_as(_spelling):
                tracking = Tracking(
                    {},
                    device=args.device,
                    explain=not args.no_explain,
                    label=args.label or "cell",
                    skip=0,
                    verbose=False,
                    files={"json": args.json, "html": args.html, "markdown": args.markdown},
                )
                tracking.begin(f"notebook cell [{shell.execution_count}]", namespace_roots(shell.user_ns))
        except MemprofError as error:
            raise IPythonUsageError(error.message) from None
        value = self._run(tracking, body, last)
        shell.user_ns[REPORT_NAME] = tracking.report
        if not args.quiet:
            from IPython.display import display

            display(tracking.report)
        return value

    def _compiled(self, source: str) -> tuple[Any, Any]:
        """The code of the cell (cached for tracebacks and source lines) without its last
        expression, and that expression (None when the cell does not end with one)."""
        shell = self._shell
        transformed = shell.transform_cell(source)
        name = shell.compile.cache(transformed, shell.execution_count, raw_code=source)
        tree = shell.transform_ast(shell.compile.ast_parse(transformed, filename=name))
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = shell.compile(ast.Expression(tree.body.pop().value), name, "eval")
        return shell.compile(tree, name, "exec"), last

    def _run(self, tracking: Tracking, body: Any, last: Any) -> Any:
        """Run the code in the notebook's namespace while ``tracking`` profiles it. A failure
        of the code is shown with the report up to it, then raised as the cell's."""
        shell = self._shell
        try:
            exec(body, shell.user_global_ns, shell.user_ns)
            value = eval(last, shell.user_global_ns, shell.user_ns) if last is not None else None
        except BaseException as error:
            tracking.end(error)
            self._show_failed(tracking)
            raise
        try:
            with spelled_as(_spelling):
                tracking.end(None)
        except MemprofError as error:
            raise IPythonUsageError(error.message) from None
        return value

    def _show_failed(self, tracking: Tracking) -> None:
        from IPython.display import display

        try:
            report = tracking.report
        except MemprofError:
            return
        self._shell.user_ns[REPORT_NAME] = report
        display(report)


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics (``%load_ext memprof``), and show reports as HTML."""
    ipython.register_magics(MemprofMagics)
    register_display(ipython)
