"""The garbage collector around a run: paused while many objects are made, what survives the
collection before the measured calls frozen for the run (later collections walk only what the
run made), and the command line's start-up objects frozen until the first run."""

from __future__ import annotations

import gc
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
        assert gc.get_freeze_count() == 0
        collect()
        assert gc.get_freeze_count() > 0
        made_later = Cycle()
        del made_later
        assert gc.collect() >= 1  # garbage made after the freeze is still collected
        del held  # frozen: a collection during the run does not walk it, nor free it
        assert gc.collect() == 0
    assert gc.get_freeze_count() == 0
    assert gc.collect() >= 1  # unfrozen with the rest: the run's garbage goes at the next collection


def test_a_program_that_froze_objects_itself_keeps_them_frozen() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    with survivors_frozen() as collect:
        collect()
        assert gc.get_freeze_count() == frozen  # nothing of the run's frozen
    assert gc.get_freeze_count() == frozen


def test_the_command_lines_start_up_objects_are_frozen_until_the_first_run_ends() -> None:
    with start_up_imports():
        assert not gc.isenabled()
        imported = [Cycle() for _ in range(10)]
    assert gc.isenabled() and gc.get_freeze_count() >= 10
    with survivors_frozen() as collect:
        collect()
    assert gc.get_freeze_count() == 0  # unfrozen with the run's: its garbage is collectable
    del imported
    assert gc.collect() >= 10
