"""The ``memprof`` command line: the typer app, and the one place errors become exit codes.

Each command lives in ``memprof/frontends/commands/<name>.py``: it takes its options (option groups are
built once, see ``memprof/frontends/commands/options.py``), calls the library, renders, and returns.
Errors are :class:`memprof.core.errors.MemprofError` subclasses; :func:`handle_errors` turns them
into a one-line message on stderr and the documented exit code (a failed gate, whose lines are
already on stdout, only sets the exit code). Nothing here imports torch: ``memprof --help``
stays fast.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import typer

from memprof.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    MemprofError,
    UserCodeError,
    path_error,
    spelled_as,
)
from memprof.core.version import __version__
from memprof.frontends.commands import Command
from memprof.frontends.commands.common import err, err_lines, hidden_line, stderr_width
from memprof.frontends.commands.groups import cli_spelling, with_option_groups

app = typer.Typer(
    name="memprof",
    help=(
        "How much memory does your PyTorch code need, which op is responsible, and does a "
        "change (torch.compile, channels_last, mmap, no_grad, checkpointing) lower it?\n\n"
        "Exit codes: 0 ok, 1 memory gate failed, 2 usage or input error, "
        "3 the profiled code failed, 130 interrupted."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Map memprof's errors to their one-line message and exit code; Ctrl-C to 130; running out
    of memory to 2. Inside the command, the library's messages name its options as flags
    (``--repeat``, not ``repeat``), and what the profiled code changes in the interpreter is
    put back afterwards (see :mod:`memprof.core.interpreter`)."""
    spelling = cli_spelling(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from memprof.core.interpreter import kept_from_user_code
        from memprof.core.writing import WRITTEN
        from memprof.sources.deadline import ending_the_process

        written_before = len(WRITTEN)
        try:
            with spelled_as(spelling), kept_from_user_code(), ending_the_process():
                return func(*args, **kwargs)
        except MemprofError as error:
            if isinstance(error, UserCodeError) and error.user_traceback:
                err_lines(error.user_traceback.rstrip("\n"))
            heard = error.hidden_messages
            hidden = hidden_line(heard.count, heard.lines(), stderr_width()) if heard is not None else None
            if hidden:
                err(f"memprof: {hidden}")
            if not error.shown:
                err(f"memprof: error: {error.message}")  # the last line
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            err(f"memprof: {interrupted(WRITTEN[written_before:])}")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except OSError as error:
            if error.filename is None:  # not a path's: memprof's own failure, shown as such
                raise
            err(f"memprof: error: {path_error(error).message}")
            raise typer.Exit(EXIT_USAGE) from None
        except MemoryError:
            # Readers name the file that was too large; this is what is left (a huge option value, ...).
            err("memprof: error: memprof ran out of memory; give it smaller inputs, or more memory")
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper  # type: ignore[return-value]


def interrupted(written: Sequence[Path]) -> str:
    """What Ctrl-C left: ``interrupted; no output was written``, or the files written in full
    before it came (Ctrl-C between two commands' writes, or after rank 0 wrote the job's)."""
    if not written:
        return "interrupted; no output was written"
    names = ", ".join(repr(str(path)) for path in dict.fromkeys(written))
    return f"interrupted after writing {names} in full; nothing else was written"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"memprof {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """memprof: memory profiles of PyTorch code, eager and compiled."""


def reflowed(func: F) -> F:
    """Join the lines of each help paragraph (rich help would keep every docstring line break);
    indented paragraphs (examples) stay as written."""
    import inspect

    paragraphs = inspect.cleandoc(func.__doc__ or "").split("\n\n")
    func.__doc__ = "\n\n".join(
        p if p.startswith(" ") else " ".join(line.strip() for line in p.splitlines()) for p in paragraphs
    )
    return func


def _register() -> None:
    # Each command is a plain function in memprof/frontends/commands/, found by its module's
    # COMMAND; registering spreads its option groups into options, wraps it in the one error
    # handler and reflows its docstring for --help.
    for command in commands():
        app.command()(handle_errors(reflowed(with_option_groups(command.function))))


def commands() -> list[Command]:
    """Every command of memprof/frontends/commands/ (each module's ``COMMAND``), in the order
    ``memprof --help`` lists them."""
    import importlib
    import pkgutil

    import memprof.frontends.commands as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        command = getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "COMMAND", None)
        if isinstance(command, Command):
            found.append(command)
    return sorted(found, key=lambda command: (command.place, command.function.__name__))


# What --help shows as an option's value: nothing for a flag (typer shows ``<bool>``), a word for
# the rest (``TEXT``, ``N``) instead of a type (``<str>``, ``<int range> [x>=1]``); the choices and
# metavars the options give themselves stay.
_VALUE_WORDS = {
    "<str>": "TEXT",
    "<int>": "N",
    "<int range>": "N",
    "<float>": "NUMBER",
    "<float range>": "NUMBER",
}


def _compact_help() -> None:
    """--help shows flags without a value and plain values as words (``TEXT``, ``N``); the
    limits of a number stay in its error message. Left as it is where typer's help differs
    (another version)."""
    from typer import core

    option, argument = getattr(core, "TyperOption", None), getattr(core, "TyperArgument", None)
    if option is None or argument is None or not hasattr(option, "display_type_rich"):
        return
    shown_by_typer = option.display_type_rich

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False):
            return None
        shown = shown_by_typer(self, ctx)
        return _VALUE_WORDS.get(shown, shown) if isinstance(shown, str) else shown

    option.display_type_rich = display_type_rich
    if hasattr(option, "_get_number_range_help_str"):
        option._get_number_range_help_str = lambda self: None
    if hasattr(argument, "display_type_rich"):
        shown_for_argument = argument.display_type_rich
        argument.display_type_rich = lambda self, ctx: _VALUE_WORDS.get(
            shown_for_argument(self, ctx) or "", shown_for_argument(self, ctx)
        )


_compact_help()
_register()


def console() -> None:
    """The ``memprof`` console script and ``python -m memprof``: :func:`main`, then the process
    ends as Python's exit would end it, less the interpreter's teardown
    (:func:`memprof.frontends.exiting.exit_fast`)."""
    from memprof.core.gcpause import ends_here
    from memprof.frontends.exiting import exit_fast

    ends_here()
    try:
        main()
    except SystemExit as done:
        exit_fast(done.code)
    exit_fast(EXIT_OK)


def main(argv: list[str] | None = None) -> None:
    """The command line (``argv``, default ``sys.argv[1:]``): the typer app, with the errors
    of option parsing (unknown option, bad value, missing argument) shown as one line, like
    memprof's own, instead of a framed panel."""
    import sys

    from memprof.frontends.commands.distributed import remember_invocation

    remember_invocation(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=argv, prog_name="memprof", standalone_mode=False)
    except KeyboardInterrupt:  # outside a command (parsing its options, or once it returned): as inside one
        from memprof.core.writing import WRITTEN

        err(f"memprof: {interrupted(WRITTEN)}")
        sys.exit(EXIT_INTERRUPTED)
    except OSError as error:  # a path the options name, refused by the system (a name too long)
        if error.filename is None:
            raise
        err(f"memprof: error: {path_error(error).message}")
        sys.exit(EXIT_USAGE)
    except Exception as error:
        # The parser's usage errors (click's, or the copy typer vendors) carry exit_code 2 and
        # format_message(); anything else is not a usage error and propagates.
        format_message = getattr(error, "format_message", None)
        if getattr(error, "exit_code", None) != EXIT_USAGE or format_message is None:
            raise
        message = format_message()
        if message:  # empty when `memprof` alone printed the help
            ctx = getattr(error, "ctx", None)
            command = getattr(ctx, "command_path", None) or "memprof"
            hint = colon_hint(message, sys.argv[1:] if argv is None else argv) or f"see '{command} --help'"
            err(f"memprof: error: {message.rstrip('.')}; {hint}")
        sys.exit(EXIT_USAGE)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def colon_hint(message: str, args: list[str]) -> str | None:
    """``memprof run x.py fn`` (a space where the colon goes): the parser sees an extra
    argument ``fn``; suggest ``x.py:fn``."""
    import re

    extra = re.search(r"unexpected extra argument\S* \(([^)\s]+)", message)
    if extra is None:
        return None
    for where, name in zip(args, args[1:], strict=False):
        if name == extra.group(1) and name.isidentifier() and ":" not in where and not where.startswith("-"):
            looks_like_module = all(part.isidentifier() for part in where.split("."))
            if where.endswith(".py") or looks_like_module:
                return f"did you mean {where}:{name}? A target is FILE.py:FUNCTION or module:function"
    return None
