"""Targets: ``pkg.mod:func``, ``pkg.mod:obj.attr`` or ``path/to/file.py:func`` -> a callable and
its inputs.

A target that does not exist is a usage error (exit 2); a target module that exists but fails
while importing, or an inputs factory that raises, is the user's code failing (exit 3).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from memprof.core.errors import (
    TargetNotFoundError,
    UsageError,
    UserCodeError,
    brief,
    format_user_traceback,
    param,
    user_code,
    what_it_did,
)
from memprof.core.reading import special_file_kind
from memprof.sources.targets.factory_fit import factory_returns, signature_of

SPEC_EXAMPLE = "'pkg.module:function', 'pkg.module:obj.method' or 'path/to/file.py:function'"


@dataclass(frozen=True)
class Target:
    """A resolved callable with where it came from: ``spec`` names it (``pkg.mod:func``),
    ``module`` holds it (and its default inputs factory), ``attr_path`` is its name there."""

    spec: str
    func: Callable[..., Any]
    module: ModuleType | None
    attr_path: str

    @staticmethod
    def of(func: Callable[..., Any]) -> Target:
        """A callable given directly (from Python), named ``module:qualname``."""
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or type(func).__name__
        module_name = getattr(func, "__module__", None) or ""
        module = sys.modules.get(module_name)
        short = getattr(func, "__name__", None)
        if module is not None and short and short != name and getattr(module, short, None) is func:
            # A builtin its module exposes under a plain name: torch.ones, whose qualname is
            # "_VariableFunctionsClass.ones", is named as it is called.
            return Target(spec=f"{module_name}.{short}", func=func, module=module, attr_path=short)
        return Target(
            spec=f"{module_name}:{name}".lstrip(":"),
            func=func,
            module=sys.modules.get(module_name),
            attr_path=name,
        )


@dataclass
class Inputs:
    """Arguments for a target: ``func(*args, **kwargs)``; ``source`` says where they came from."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = "none"


def split_spec(spec: str) -> tuple[str, str]:
    """``"a.b:c.d"`` -> ``("a.b", "c.d")``; raises UsageError for anything else."""
    where, sep, attr_path = spec.rpartition(":")
    valid_attr = bool(attr_path) and all(part.isidentifier() for part in attr_path.split("."))
    if not sep or not where or not valid_attr:
        raise UsageError(f"target {brief(spec, 200)} is not of the form {SPEC_EXAMPLE}")
    return where, attr_path


def is_path(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def load_module(where: str, spec: str) -> ModuleType:
    """Import the module part of a target, from the working directory first (as ``python -m``)."""
    if is_path(where):
        return _load_file(Path(where), spec)
    cwd = working_directory_on_path()
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if where == missing or where.startswith(missing + "."):
            raise module_not_found(missing, cwd, spec) from None
        raise UserCodeError(
            f"importing {where!r} failed: it imports {missing!r}, which is not installed",
            user_traceback=format_user_traceback(error),
        ) from None
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        # sys.exit() in the module's top level is its import failing, not memprof's exit.
        raise UserCodeError(
            f"importing {where!r} failed: it {what_it_did(error)}",
            user_traceback=format_user_traceback(error),
        ) from None


def working_directory_on_path() -> str:
    """The working directory, put first on ``sys.path`` unless it is there already: a console
    script does not put it there; ``python -m`` does."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    return cwd


def module_not_found(missing: str, cwd: str, spec: str) -> TargetNotFoundError:
    """The error for a module of a target that is nowhere to import from."""
    return TargetNotFoundError(
        f"module {missing!r} not found (searched the working directory {cwd} and "
        f"PYTHONPATH); check the spelling of {spec!r} or run from the folder that holds it"
    )


def _load_file(path: Path, spec: str) -> ModuleType:
    check_file(path, spec)
    try:
        return _load_existing_file(path, spec)
    except OSError as error:  # a name too long, a folder that cannot be searched, ...
        raise _unreadable(path, spec, error) from None


def _unreadable(path: Path, spec: str, error: OSError) -> TargetNotFoundError:
    reason = error.strerror or str(error)
    return TargetNotFoundError(f"file {str(path)!r} of target {spec!r} cannot be read: {reason}")


def check_file(path: Path, spec: str) -> None:
    """A target's file that is not a Python file to import (a folder, a device, missing, or
    unreadable) is exit 2; nothing is run to find out."""
    try:
        if path.is_dir():
            raise TargetNotFoundError(f"{str(path)!r} in target {spec!r} is a folder; name a .py file")
        if path.exists() and not path.is_file():
            raise TargetNotFoundError(
                f"{str(path)!r} in target {spec!r} is {special_file_kind(path)}; name a .py file"
            )
        if not path.is_file():
            raise TargetNotFoundError(f"file {str(path)!r} of target {spec!r} does not exist")
    except OSError as error:  # a name too long, a folder that cannot be searched, ...
        raise _unreadable(path, spec, error) from None


def module_name_of_file(path: Path) -> str:
    """The name a target file is imported under: its stem, when that is a Python name."""
    resolved = path.resolve()
    return resolved.stem if resolved.stem.isidentifier() else "memprof_target"


def _load_existing_file(path: Path, spec: str) -> ModuleType:
    resolved = path.resolve()
    name = module_name_of_file(resolved)
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == str(resolved):
        return existing
    # Like `python path/to/file.py`: the file's folder comes first on sys.path, so it can
    # import its neighbours.
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise TargetNotFoundError(f"{str(path)!r} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as error:
        sys.modules.pop(name, None)
        if isinstance(error, KeyboardInterrupt):
            raise
        raise UserCodeError(
            f"running {str(path)!r} failed: it {what_it_did(error)}",
            user_traceback=format_user_traceback(error),
        ) from None
    return module


def resolve(spec: str) -> Target:
    """Resolve a target spec to its callable."""
    where, attr_path = split_spec(spec)
    module = load_module(where, spec)
    obj: Any = module
    walked: list[str] = []
    for part in attr_path.split("."):
        owner = where if not walked else f"{where}:{'.'.join(walked)}"
        missing = object()
        # A property or a module's __getattr__ is the user's code running.
        getting = f"getting {part!r} from {owner!r} failed: it "  # bound now, in the loop
        with user_code(getting.__add__):
            found = getattr(obj, part, missing)
        if found is missing:
            raise no_attribute(owner, part, close_names(part, dir(obj)))
        obj = found
        walked.append(part)
    if not callable(obj):
        raise UsageError(f"{spec!r} is a {type(obj).__name__}, not a function; name a callable")
    return Target(spec=spec, func=obj, module=module, attr_path=attr_path)


def close_names(part: str, names: Iterable[str]) -> list[str]:
    """The names (dunder names aside) that ``part`` may be a misspelling of, closest first."""
    return difflib.get_close_matches(part, [n for n in names if not n.startswith("__")], n=3, cutoff=0.6)


def no_attribute(owner: str, part: str, close: list[str]) -> TargetNotFoundError:
    """``owner`` (a module or an object in it) has nothing named ``part``."""
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return TargetNotFoundError(f"{owner!r} has no attribute {part!r}{hint}")


def required_parameters(func: Callable[..., Any]) -> list[str]:
    """Names of parameters a call without arguments would leave unfilled."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        )
    ]


def accepts(func: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


InputsFactory = str | Callable[..., Any]
"""Where a target's arguments come from: a factory's spec (``pkg.mod:make``) or the factory."""


def parse_value(text: str) -> Any:
    """A factory parameter's value as written on the command line: ``8`` an int, ``0.5`` or
    ``1e-3`` a float, ``true``/``false`` a bool (any case), anything else (or anything in
    quotes, ``'8'``) a string."""
    stripped = text.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        return stripped[1:-1]
    if stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    try:
        return int(stripped, 10)
    except ValueError:
        pass
    try:
        value = float(stripped)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def factory_parameters(make: Callable[..., Any]) -> tuple[list[str], bool]:
    """The names a factory takes by keyword (``device`` excluded: memprof passes it), and
    whether it takes any keyword (``**kwargs``)."""
    try:
        parameters = list(inspect.signature(make).parameters.values())
    except (TypeError, ValueError):
        return [], True
    named = [
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        and p.name != "device"
    ]
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def check_params(names: list[str], open_ended: bool, source: str, params: dict[str, Any]) -> None:
    """``params`` for a factory that takes ``names`` by keyword (and any name when
    ``open_ended``): ``device`` or a name it does not take is exit 2."""
    if "device" in params:
        raise UsageError(
            f"the inputs factory's device is memprof's to set ({param('device')}); "
            f"remove device from {param('inputs_kwargs')}"
        )
    unknown = sorted(set(params) - set(names))
    if unknown and not open_ended:
        takes = ", ".join(names) if names else "no parameters"
        raise UsageError(f"inputs factory {source!r} has no parameter {', '.join(unknown)}; it takes {takes}")


def build_inputs(
    target: Target, factory: InputsFactory | None, device: str, params: dict[str, Any] | None = None
) -> Inputs:
    """Make the target's arguments: from ``factory``, else ``<func>_inputs`` in its module,
    else none. A factory that accepts ``device`` gets the chosen device; ``params`` are passed
    to it by keyword (a name it does not take is a :class:`UsageError` listing those it does)."""
    if params and not isinstance(factory, str) and factory is None and not required_parameters(target.func):
        raise no_factory_for(target.spec, params)
    if isinstance(factory, str):
        source = factory
        make = resolve(factory).func
    elif factory is not None:
        source = Target.of(factory).spec
        make = factory
    else:
        required = required_parameters(target.func)
        if not required:
            return Inputs(source="none")
        factory_name = f"{target.attr_path.split('.')[-1]}_inputs"
        found = getattr(target.module, factory_name, None)
        module_part = target.spec.rpartition(":")[0]
        if found is None or not callable(found):
            likely = candidate_factories(target.module, target)
            raise UsageError(missing_inputs_message(target.spec, required, factory_name, module_part, likely))
        source = f"{module_part}:{factory_name}"
        make = found
    if params:
        check_params(*factory_parameters(make), source, params)
    return _call_factory(make, source, device, params or {})


def no_factory_for(spec: str, params: dict[str, Any]) -> UsageError:
    """Factory parameters given for a target that takes no arguments."""
    return UsageError(
        f"{spec!r} takes no arguments, so there is no inputs factory to give "
        f"{', '.join(params)} to; name one with {param('inputs')}"
    )


# Names that read like an inputs factory: make_*, *_inputs, *_batch, and inputs/batch/example
# factories however prefixed (get_batch, sample_inputs, example_inputs).
_FACTORY_NAME = re.compile(
    r"^make_|_inputs$|_batch$|^(get_|load_|sample_|example_|build_)?(inputs|batch|example)$"
)


def looks_like_factory(name: str) -> bool:
    """Whether a function's name reads like an inputs factory's (``make_batch``, ``get_inputs``)."""
    return _FACTORY_NAME.search(name) is not None


_FACTORY_PREFIXES = ("make_", "get_", "load_", "sample_", "example_", "build_")
_FACTORY_SUFFIXES = ("_inputs", "_batch", "_example", "_args")
# Words of a function's name that say what kind of function it is, not what it works on.
_GENERIC_WORDS = frozenset({"step", "run", "fn", "func", "forward", "main", "call", "train", "eval", "test"})


def _stem(name: str) -> str:
    """``make_vit_batch`` -> ``vit``: a factory's name without what makes it read like one."""
    for prefix in _FACTORY_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            name = name[len(prefix) :]
            break
    for suffix in _FACTORY_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def rank_factories(
    target: str, target_line: int | None, found: Iterable[tuple[str, int | None]]
) -> list[str]:
    """Candidate factories (name, line of their ``def``) of ``target`` (a function's name,
    defined at ``target_line``), the likeliest first: named after it (``make_step``,
    ``step_batch``), then sharing a word of its name (``vit_inputs`` for ``vit_step``), then
    defined nearest to it, then by name."""
    words = set(target.split("_")) - _GENERIC_WORDS - {""}

    def likelihood(item: tuple[str, int | None]) -> tuple[int, int, int, str]:
        name, line = item
        stem = _stem(name)
        kin = 0 if stem == target else 1 if words & set(stem.split("_")) else 2
        distance = abs(line - target_line) if line is not None and target_line is not None else 0
        return kin, -len(words & set(stem.split("_"))), distance, name

    return [name for name, _ in sorted(found, key=likelihood)]


def _def_line(value: Any) -> int | None:
    code = getattr(inspect.unwrap(value), "__code__", None) if callable(value) else None
    return getattr(code, "co_firstlineno", None)


def candidate_factories(module: ModuleType | None, target: Target | None = None) -> list[str]:
    """The module's own functions whose names read like inputs factories, the likeliest for
    ``target`` first (:func:`rank_factories`; in name order without a target)."""
    if module is None:
        return []
    found = []
    for name, value in vars(module).items():
        if (
            looks_like_factory(name)
            and inspect.isfunction(value)
            and getattr(value, "__module__", None) == module.__name__
        ):
            found.append((name, _def_line(value)))
    if target is None:
        return sorted(name for name, _ in found)
    # A factory whose returns surely do not fill the target's arguments is never suggested.
    signature = signature_of(target.func)
    if signature is not None:
        found = [
            (name, line)
            for name, line in found
            if signature.filled_by(factory_returns(vars(module)[name])) is not False
        ]
    return rank_factories(target.attr_path.split(".")[-1], _def_line(target.func), found)


def missing_inputs_message(
    spec: str, required: list[str], factory_name: str, module_part: str, found: list[str]
) -> str:
    """A target needs arguments and has no ``<func>_inputs``: name the module's functions that
    look like factories (``found``, the likeliest first: at most three), or say how to write
    one."""
    needs = f"{spec!r} needs arguments ({', '.join(required)})"
    if found:
        options = " or ".join(param("inputs", f"{module_part}:{name}") for name in found[:3])
        return f"{needs}: give them with {options}, or define {factory_name}() in {module_part}"
    return (
        f"{needs}: give a function that returns them with {param('inputs', f'{module_part}:FACTORY')}, "
        f"or define {factory_name}() in {module_part}"
    )


def _call_factory(make: Callable[..., Any], source: str, device: str, params: dict[str, Any]) -> Inputs:
    # A factory may refuse on purpose (e.g. "this example needs CUDA", a UsageError): memprof's
    # errors keep their own exit code, they are not the user's code failing.
    with user_code(lambda did: f"inputs factory {source!r} failed: it {did}"):
        made = make(device=device, **params) if accepts(make, "device") else make(**params)
    _check_made(made, source)
    if isinstance(made, dict):
        return Inputs(kwargs=dict(made), source=source)
    if isinstance(made, tuple | list):
        return Inputs(args=tuple(made), source=source)
    return Inputs(args=(made,), source=source)


_MADE_EXAMPLE = "a tuple/list (*args), a dict (**kwargs) or one argument"


def _check_made(made: Any, source: str) -> None:
    """Arguments that cannot be used as returned: None (a forgotten ``return``), and one-shot
    iterators that the warm-up call would use up, leaving nothing for the profiled calls."""
    if made is None:
        raise UsageError(f"inputs factory {source!r} returned None; return the arguments: {_MADE_EXAMPLE}")
    if inspect.isgenerator(made) or inspect.iscoroutine(made) or inspect.isasyncgen(made):
        if inspect.iscoroutine(made):
            made.close()  # no "never awaited" warning on top of this error
        raise UsageError(
            f"inputs factory {source!r} returned a {type(made).__name__}, which the first call "
            f"would use up; return the arguments themselves: {_MADE_EXAMPLE}"
        )


def check_measurable(func: Callable[..., Any], spec: str) -> None:
    """Refuse (exit 2) a target whose call does not run its body: a generator function or an
    ``async def``; calling it only creates the generator or coroutine, so nothing is measured."""
    name = spec.rpartition(":")[2] or spec
    if inspect.isasyncgenfunction(func):
        raise UsageError(
            f"{spec!r} is an async generator function: calling it runs none of its body; profile a "
            f"function that consumes it, e.g. asyncio.run of an async loop over {name}(...)"
        )
    if inspect.isgeneratorfunction(func):
        raise UsageError(
            f"{spec!r} is a generator function: calling it runs none of its body; profile a "
            f"function that consumes it, e.g. def run(): return list({name}(...))"
        )
    if inspect.iscoroutinefunction(func):
        raise UsageError(
            f"{spec!r} is an async function: calling it runs none of its body; wrap it in "
            f"asyncio.run, e.g. def run(): return asyncio.run({name}(...))"
        )


def unrun_result(result: Any) -> str | None:
    """``"generator"`` or ``"coroutine"`` when a call returned one (its body has not run), else
    None; a coroutine is closed so that Python does not warn it was never awaited."""
    if inspect.iscoroutine(result):
        result.close()
        return "coroutine"
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        return type(result).__name__
    return None


def restore_import_path(before: list[str]) -> None:
    """Put back the ``sys.path`` entries that the user's code removed (after those it added):
    torch and memprof import modules lazily, and must still find them after code that cleared
    or replaced ``sys.path``."""
    if not isinstance(sys.path, list):
        sys.path = list(before)
    missing = [entry for entry in before if entry not in sys.path]
    sys.path.extend(missing)


def spec_file(spec: str) -> Path | None:
    """The source file a target or inputs spec names, found without running any code: the
    file of ``path/to/file.py:f``, the module's file for ``pkg.mod:f``; None when not found."""
    try:
        where, _ = split_spec(spec)
    except UsageError:
        return None
    if is_path(where):
        return Path(where)
    loaded = sys.modules.get(where)
    if loaded is not None:
        file = getattr(loaded, "__file__", None)
        return Path(file) if file else None
    parts = where.split(".")
    for entry in [os.getcwd(), *sys.path]:
        folder = Path(entry or os.getcwd()).joinpath(*parts[:-1])
        for candidate in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__init__.py"):
            try:
                if candidate.is_file():
                    return candidate
            except OSError:  # a name too long for the file system, ...: not this one
                continue
    return None
