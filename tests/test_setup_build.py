"""setup.py's native-module build leaves no ``benanza-cmake-*`` folder behind (issue 53, item 14): the
CMake build folder is temporary and removed when the build ends, built or failed. setup.py is loaded
as a module (its ``setup()`` call runs only as a script, as pip and setuptools run it) and its build
helper given a recording stand-in for subprocess.run: no compiler runs."""
import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def setup_module(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp makes the build folder
    spec = importlib.util.spec_from_file_location("benanza_setup_script", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _builds(fail_at=None):
    seen = []

    def run(cmd, check=False, **kw):
        b = Path(cmd[cmd.index("-B") + 1]) if "-B" in cmd else Path(cmd[cmd.index("--build") + 1])
        seen.append((b, b.is_dir()))
        if fail_at is not None and len(seen) == fail_at:
            raise subprocess.CalledProcessError(1, cmd)
        return subprocess.CompletedProcess(cmd, 0)

    return run, seen


def test_the_build_folder_is_removed_after_a_build(setup_module, tmp_path):
    run, seen = _builds()
    setup_module.cmake_build("cmake", ["-DX=1"], tmp_path / "out", run=run)
    assert len(seen) == 2 and seen[0][0] == seen[1][0] and seen[0][1] and seen[0][0].name.startswith("benanza-cmake-")
    assert not seen[0][0].exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("benanza-cmake-")] == []


@pytest.mark.parametrize("fail_at", [1, 2])
def test_the_build_folder_is_removed_after_a_failure(setup_module, tmp_path, fail_at):
    run, seen = _builds(fail_at)
    with pytest.raises(SystemExit, match="building the native module failed"):
        setup_module.cmake_build("cmake", [], tmp_path / "out", run=run)
    assert seen and not seen[0][0].exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("benanza-cmake-")] == []
