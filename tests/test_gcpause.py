"""The garbage collector around a run: paused while many objects are made, what survives the
collection before the measured calls frozen for the run (later collections walk only what the
run made), the command line's start-up objects frozen until the first run, and the imports the
profiled code makes before its measured calls paused and frozen the same way; and the last
profile of a command-line run left to the process's end."""

from __future__ import annotations

import builtins
import gc
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memprof.core import gcpause
from memprof.core.gcpause import (
    gc_paused,
    imports_frozen,
    memprof_freezes,
    start_up_imports,
    survivors_frozen,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and the collector on."""
    gc.unfreeze()
    gcpause._memprof_froze = False
    yield
    gc.unfreeze()
    gcpause._memprof_froze = False
    gc.enable()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_paused_collector_is_restored_as_it_was() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_survivors_are_frozen_for_the_run_and_its_garbage_is_collected_after() -> None:
    with survivors_frozen() as collect:
        held = Cycle()
        collect()
        assert gc.get_freeze_count() > 0 and not any(o is held for o in gc.get_objects())
        made_later = weakref.ref(Cycle())
        gc.collect()
        assert made_later() is None  # garbage made after the freeze is still collected
        survivor = weakref.ref(held)
        del held
        gc.collect()
        assert survivor() is not None  # frozen: a collection during the run does not walk it
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert survivor() is None  # unfrozen with the rest: collected at the next collection


def test_a_program_that_froze_objects_itself_keeps_them_frozen() -> None:
    gc.freeze()
    made = Cycle()
    with survivors_frozen() as collect:
        collect()
        assert any(o is made for o in gc.get_objects())  # nothing of the run's frozen
    assert gc.get_freeze_count() > 0  # the program's own freeze stands


def test_the_command_lines_start_up_objects_are_frozen_until_the_first_run_ends() -> None:
    with start_up_imports():
        assert not gc.isenabled()
        imported = Cycle()
    assert gc.isenabled() and not any(o is imported for o in gc.get_objects())
    with survivors_frozen() as collect:
        collect()
    assert gc.get_freeze_count() == 0  # unfrozen with the run's: its garbage is collectable
    start_up = weakref.ref(imported)
    del imported
    gc.collect()
    assert start_up() is None


Modules = Callable[[str, str], str]


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Modules:
    """Writes a module to import (a new name each test) and returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, body: str) -> str:
        unique = f"{name}_{tmp_path.name.replace('-', '_')}"
        (tmp_path / f"{unique}.py").write_text(body)
        monkeypatch.delitem(sys.modules, unique, raising=False)
        return unique

    return write


# A module that notes whether the collector ran during its import and keeps a cycle alive.
NOTING = """
import gc
collector_on = gc.isenabled()
class Held:
    def __init__(self):
        self.me = self
held = Held()
"""


def test_an_import_runs_with_the_collector_paused_and_what_it_made_is_frozen(modules: Modules) -> None:
    name = modules("noting", NOTING)
    with imports_frozen():
        module = __import__(name)
        assert gc.isenabled()  # on again once the import is done
    assert module.collector_on is False
    assert not any(o is module.held for o in gc.get_objects())  # frozen: later collections skip it
    assert gcpause._memprof_froze


def test_garbage_made_before_an_import_is_collected_not_frozen(modules: Modules) -> None:
    name = modules("plain", "VALUE = 1\n")
    garbage = weakref.ref(Cycle())
    with imports_frozen():
        __import__(name)
    assert garbage() is None


def test_once_memprof_froze_an_import_does_not_count_the_frozen_objects(
    modules: Modules, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gc.get_freeze_count()`` walks every frozen object (a million once torch is imported):
    asked at each module a compile loads, it cost a warm compile of the GPT example about a
    second. Once memprof froze, it knows the frozen objects are its own without counting them."""
    first, second = modules("first", "VALUE = 1\n"), modules("second", "VALUE = 2\n")
    with imports_frozen():
        __import__(first)
    assert gcpause._memprof_froze
    counted: list[int] = []
    real = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: counted.append(1) or real())
    with imports_frozen():
        module = __import__(second)
    assert counted == [] and module.VALUE == 2


def test_modules_already_loaded_neither_collect_nor_freeze() -> None:
    garbage = weakref.ref(Cycle())
    with imports_frozen():
        import json  # noqa: F401 - loaded already

        assert gc.isenabled()
    assert gc.get_freeze_count() == 0 and garbage() is not None
    gc.collect()
    assert garbage() is None


def test_a_program_that_froze_objects_itself_gets_the_pause_but_no_freeze(modules: Modules) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    name = modules("noting", NOTING)
    with imports_frozen():
        module = __import__(name)
    assert module.collector_on is False
    assert gc.get_freeze_count() == frozen and not gcpause._memprof_froze


def test_a_collector_the_program_turned_off_stays_off(modules: Modules) -> None:
    name = modules("plain", "VALUE = 1\n")
    gc.disable()
    with imports_frozen():
        __import__(name)
    assert not gc.isenabled() and gc.get_freeze_count() == 0


def test_another_threads_import_is_left_as_it_is(modules: Modules) -> None:
    name = modules("noting", NOTING)
    found: list[Any] = []
    with imports_frozen():
        thread = threading.Thread(target=lambda: found.append(__import__(name)))
        thread.start()
        thread.join()
    assert found[0].collector_on is True and gc.get_freeze_count() == 0


def test_a_failing_import_turns_the_collector_back_on_and_the_hook_is_removed(modules: Modules) -> None:
    name = modules("failing", "raise ValueError('broken module')\n")
    importer, finders = builtins.__import__, list(sys.meta_path)
    with imports_frozen(), pytest.raises(ValueError, match="broken module"):
        __import__(name)
    assert gc.isenabled()
    assert builtins.__import__ is importer and sys.meta_path == finders


def test_what_memprof_froze_is_unfrozen_when_the_profiling_ends(modules: Modules) -> None:
    name = modules("noting", NOTING)
    with memprof_freezes():
        with imports_frozen():
            module = __import__(name)
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0 and not gcpause._memprof_froze
    assert any(o is module.held for o in gc.get_objects())


def test_a_runs_imports_are_paused_before_its_measured_calls_not_in_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the target's file, its inputs factory and its warm-up call import loads with the
    collector paused; an import in a measured call runs as it would in the program; nothing
    memprof froze is left frozen after the run."""
    import memprof

    monkeypatch.syspath_prepend(str(tmp_path))
    names = {}
    for phase in ("at_load", "in_factory", "first_call", "later_call"):
        names[phase] = f"{phase}_{tmp_path.name.replace('-', '_')}"
        (tmp_path / f"{names[phase]}.py").write_text(NOTING)
    (tmp_path / "imports_target.py").write_text(
        f"import torch\nimport {names['at_load']}\ncalls = 0\n\n"
        f"def step(x):\n    global calls\n    calls += 1\n"
        f"    if calls == 1:\n        import {names['first_call']}\n"
        f"    if calls == 2:\n        import {names['later_call']}\n    return x * 2\n\n"
        f"def step_inputs():\n    import {names['in_factory']}\n    return (torch.ones(8),)\n"
    )
    target = f"{tmp_path}/imports_target.py"
    inputs = f"{target}:step_inputs"
    memprof.compare(f"{target}:step", inputs=inputs, device="cpu", explain=False, time_budget=0)
    paused = {phase: not sys.modules[name].collector_on for phase, name in names.items()}
    assert paused == {"at_load": True, "in_factory": True, "first_call": True, "later_call": False}
    assert gc.get_freeze_count() == 0 and builtins.__import__ is __import__


# An object that says when it is freed.
FREED = """
from memprof.core import gcpause
from memprof.frontends import exiting

class Noted:
    def __init__(self, name):
        self.name = name
    def __del__(self):
        print("freed", self.name, flush=True)
"""


def python(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "held.py"
    script.write_text(body)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env)


def test_what_is_held_to_the_end_is_not_freed_by_a_fast_exit(tmp_path: Path) -> None:
    done = python(
        FREED
        + """
gcpause.ends_here()
gcpause.hold_to_end(Noted("first"))
gcpause.hold_to_end(Noted("second"))  # one at a time: the first is freed now
print("leaving", flush=True)
exiting.exit_fast(0)
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["freed first", "leaving"]


def test_outside_the_command_line_nothing_is_held(tmp_path: Path) -> None:
    done = python(FREED + 'gcpause.hold_to_end(Noted("it"))\nprint("after", flush=True)\n', tmp_path)
    assert done.stdout.splitlines() == ["freed it", "after"]


def test_a_run_holds_its_last_profile_and_no_profile_while_it_makes_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Numbers alone: the measured calls' profile is held. Explained: the explaining call's,
    and the measured calls' profile is freed before that call starts (never two at once)."""
    import memprof
    from memprof.sources.live import run as live

    monkeypatch.setattr(gcpause, "_ends_here", True)
    held_at_explaining_call: list[int] = []
    original = live.explaining_call

    def explaining_call(*args: Any, **kwargs: Any) -> Any:
        held_at_explaining_call.append(len(gcpause._held))
        return original(*args, **kwargs)

    monkeypatch.setattr(live, "explaining_call", explaining_call)
    memprof.compare("memprof.examples.similarity:similarity", device="cpu", explain=False, time_budget=0)
    assert [type(thing).__name__ for thing in gcpause._held] == ["profile"]
    measured = gcpause._held[0]
    memprof.compare("memprof.examples.similarity:similarity", device="cpu", time_budget=0)
    assert held_at_explaining_call == [0]
    assert len(gcpause._held) == 1 and gcpause._held[0] is not measured
    gcpause.release_held()
