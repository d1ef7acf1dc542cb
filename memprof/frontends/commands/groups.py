"""How a command's option groups become its command-line options, and the library's parameter
names this command line's flags.

A command declares an option group (:mod:`memprof.frontends.commands.options`) as one parameter,
``output: OutputOptions``; :func:`with_option_groups` (applied to every command by
``memprof.frontends.cli``) spreads the group's fields into the command line's options and builds
the group back, once, before the command runs. :func:`cli_spelling` turns the library's
parameter names into the command's flags, so that messages name ``--repeat`` where the library
says ``repeat``. Importing it loads neither torch nor pandas.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from typer.models import OptionInfo

from memprof.core.errors import NO_VALUE, Spelling


class OptionGroup:
    """Base of the option groups: frozen dataclasses whose fields are options."""


F = TypeVar("F", bound=Callable[..., Any])


def with_option_groups(command: F) -> F:
    """``command`` with each option-group parameter spread into its options (for typer), and
    the group built from them before ``command`` is called. Commands without groups are
    returned as they are."""
    hints = typing.get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, Any] = {}
    for parameter in inspect.signature(command).parameters.values():
        annotation = hints.get(parameter.name, parameter.annotation)
        if isinstance(annotation, type) and issubclass(annotation, OptionGroup):
            group: Any = annotation
            groups[parameter.name] = group
            group_hints = typing.get_type_hints(group, include_extras=True)
            parameters += [
                inspect.Parameter(
                    f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=group_hints[f.name]
                )
                for f in dataclasses.fields(group)
            ]
        else:
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=annotation))
    if not groups:
        return command
    names = [p.name for p in parameters]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise TypeError(f"{command.__name__}: option groups declare {', '.join(clashes)} twice")

    @functools.wraps(command)
    def spread(**options: Any) -> Any:
        for name, group in groups.items():
            options[name] = group(**{f.name: options.pop(f.name) for f in dataclasses.fields(group)})
        return command(**options)

    spread.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    spread.__annotations__ = {p.name: p.annotation for p in parameters}
    return spread  # type: ignore[return-value]


# How the library's parameters read on this command line where one option says it (the
# library's mode="both" is run's --compare-compile), and where no option of the command does.
_SPELLED = {("mode", "both"): ("compare_compile", "memprof run TARGET --compare-compile")}


def option_flags(command: Callable[..., Any]) -> dict[str, str]:
    """Each option's parameter name -> its long flag (``json_path`` -> ``--json``)."""
    flags = {}
    for parameter in inspect.signature(command).parameters.values():
        info = _option_info(parameter)
        if info is None:
            continue
        declared = ([info.default] if isinstance(info.default, str) else []) + list(info.param_decls or ())
        long = [d.split("/")[0] for d in declared if isinstance(d, str) and d.startswith("--")]
        if long:
            flags[parameter.name] = long[0]
    return flags


def _option_info(parameter: inspect.Parameter) -> OptionInfo | None:
    if isinstance(parameter.default, OptionInfo):
        return parameter.default
    for meta in getattr(parameter.annotation, "__metadata__", ()):
        if isinstance(meta, OptionInfo):
            return meta
    return None


def cli_spelling(command: Callable[..., Any]) -> Spelling:
    """Parameters as this command's flags: ``repeat`` -> ``--repeat``, ``mode='eager'`` ->
    ``--mode eager``, ``strict_env=True`` -> ``--strict-env``; None for a parameter the
    command has no option for."""
    flags = option_flags(command)

    def spell(name: str, value: Any = NO_VALUE) -> str | None:
        if (name, value) in _SPELLED:
            option, elsewhere = _SPELLED[(name, value)]
            return flags.get(option, elsewhere)
        flag = flags.get(name)
        if flag is None or value is NO_VALUE or value is True:
            return flag
        return f"{flag} {value}"

    return spell
