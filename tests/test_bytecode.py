"""memprof's own modules compiled once where Python writes no bytecode (memprof.core.bytecode)."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memprof.core import bytecode

ROOT = Path(__file__).resolve().parents[1]


def _loader(tmp_path: Path, source: str) -> tuple[bytecode._Loader, Path, Path]:
    module = tmp_path / "src" / "mod.py"
    module.parent.mkdir(exist_ok=True)
    module.write_text(source)
    folder = tmp_path / "cache"
    return bytecode._Loader("memprof_mod", str(module), str(folder)), module, folder


def _run(code: object) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102 - the test's own module
    return namespace


def test_a_module_is_compiled_once_and_then_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader, module, folder = _loader(tmp_path, "VALUE = 41 + 1\n")
    first = loader.get_code("memprof_mod")
    assert _run(first)["VALUE"] == 42 and len(list(folder.iterdir())) == 1

    def no_compiling(*args: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(loader, "source_to_code", no_compiling)
    again = loader.get_code("memprof_mod")
    assert _run(again)["VALUE"] == 42
    assert again.co_filename == str(module)  # tracebacks and frame kinds name the source


def test_an_edited_module_is_compiled_again(tmp_path: Path) -> None:
    loader, module, folder = _loader(tmp_path, "VALUE = 1\n")
    loader.get_code("memprof_mod")
    module.write_text("VALUE = 2\n")
    assert _run(loader.get_code("memprof_mod"))["VALUE"] == 2
    assert len(list(folder.iterdir())) == 2


def test_a_damaged_entry_is_compiled_again(tmp_path: Path) -> None:
    loader, _, folder = _loader(tmp_path, "VALUE = 3\n")
    loader.get_code("memprof_mod")
    (entry,) = folder.iterdir()
    entry.write_bytes(entry.read_bytes()[:20])  # cut short
    assert _run(loader.get_code("memprof_mod"))["VALUE"] == 3
    entry.write_bytes(b"not bytecode")
    assert _run(loader.get_code("memprof_mod"))["VALUE"] == 3
    entry.write_bytes(entry.read_bytes()[:16] + marshal.dumps(7))  # well formed, but not code
    assert _run(loader.get_code("memprof_mod"))["VALUE"] == 3


def test_a_folder_that_cannot_be_written_leaves_imports_as_they_were(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the folder would be
    module = tmp_path / "mod.py"
    module.write_text("VALUE = 4\n")
    loader = bytecode._Loader("memprof_mod", str(module), str(blocked / "cache"))
    assert _run(loader.get_code("memprof_mod"))["VALUE"] == 4


def test_a_full_folder_is_emptied_before_the_next_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bytecode, "_MAX_ENTRIES", 3)
    loader, module, folder = _loader(tmp_path, "VALUE = 0\n")
    for value in range(6):
        module.write_text(f"VALUE = {value}\n")
        assert _run(loader.get_code("memprof_mod"))["VALUE"] == value
        assert len(list(folder.iterdir())) <= 4


def _start(tmp_path: Path, *flags: str, **env: str) -> dict[str, object]:
    """A fresh interpreter importing memprof's run path: what it loaded, and how."""
    probe = (
        "import json, sys, memprof.library.api; from memprof.core import bytecode;"
        "loader = type(sys.modules['memprof.library.api'].__spec__.loader).__name__;"
        "print(json.dumps({'cached': loader == '_Loader',"
        " 'folder': bytecode.cache_folder()}))"
    )
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run(
        [sys.executable, *flags, "-c", probe],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_where_python_writes_no_bytecode_memprof_keeps_its_own(tmp_path: Path) -> None:
    first = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    folder = Path(str(first["folder"]))
    assert first["cached"] and folder.is_relative_to(tmp_path)
    entries = sorted(folder.iterdir())
    assert len(entries) > 20  # memprof's modules on the run path, and nobody else's
    second = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert second["cached"] and sorted(folder.iterdir()) == entries  # read, nothing new written
    optimised = _start(tmp_path, "-O", PYTHONDONTWRITEBYTECODE="1")  # asserts compiled out: not shared
    assert optimised["cached"] and len(list(folder.iterdir())) == 2 * len(entries)


def test_elsewhere_and_when_turned_off_python_does_the_work(tmp_path: Path) -> None:
    off = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1", MEMPROF_BYTECODE_CACHE="0")
    assert not off["cached"] and not Path(str(off["folder"])).exists()
    # Python writing bytecode itself (into a folder of the test's: PYTHONPYCACHEPREFIX)
    python = _start(tmp_path, PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"))
    assert not python["cached"] and not Path(str(python["folder"])).exists()


def test_without_a_home_folder_nothing_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # no HOME: "~" stays "~"
    assert bytecode.cache_folder() is None
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as XDG says
    assert bytecode.cache_folder() is None
