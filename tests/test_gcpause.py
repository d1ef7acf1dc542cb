"""The garbage collector around a run: paused while many objects are made, what survives the
collection before the measured calls frozen for the run (later collections walk only what the
run made), and the command line's start-up objects frozen until the first run."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from memprof import gcpause
from memprof.gcpause import gc_paused, start_up_imports, survivors_frozen


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and the collector on."""
    gc.unfreeze()
    gcpause._start_up_frozen = False
    yield
    gc.unfreeze()
    gcpause._start_up_frozen = False
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
