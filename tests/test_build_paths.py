"""A suite folder whose path CMake cannot take (issue 53, item 11): CMake splits a path at ``;`` (a
list), expands ``$`` and ends a quoted argument at ``"`` or escapes at ``\\``; its own compiler check
then fails and writes a stray folder beside the suite (``/tmp/x;y/suite`` made ``/tmp/x``). Such a
folder is refused with one line naming it, before anything is written or CMake runs; an ordinary
folder with a space still configures (CMake runs here without a GPU: the configure step only)."""
import shutil
from pathlib import Path

import pytest

from benanza.build import builder
from benanza.errors import UsageError
from benanza.generation.generator import check_cmake_path, generate
from benanza.processing.model import process
from onnx_builders import mlp_model

BAD = ["x;y", "x$y", 'x"y', "x\\y", "x\ny"]


@pytest.fixture(scope="module")
def layers(tmp_path_factory):
    p = tmp_path_factory.mktemp("m") / "mlp.onnx"
    mlp_model(p)
    return [process(p, 1)]


@pytest.mark.parametrize("name", BAD)
def test_generate_refuses_the_folder_and_writes_nothing(name, tmp_path, layers):
    folder = tmp_path / name / "suite"
    with pytest.raises(UsageError) as e:
        generate(layers, ["fp32"], folder)
    msg = str(e.value)
    assert repr(str(folder)) in msg or str(folder) in msg, msg
    assert "\n" not in msg.replace(repr(str(folder)), "")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", BAD[:4])
def test_build_refuses_a_suite_moved_into_such_a_folder_before_cmake_runs(name, tmp_path, layers, monkeypatch):
    good = tmp_path / "good" / "suite"
    generate(layers, ["fp32"], good)
    bad = tmp_path / name / "suite"
    bad.parent.mkdir()
    shutil.move(str(good), str(bad))
    ran = []
    monkeypatch.setattr(builder, "_run", lambda cmd, *a, **k: ran.append(cmd))
    with pytest.raises(UsageError, match=r"CMake"):
        builder.build(bad)
    assert ran == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good", name]
    assert not (bad / "build").exists()


def test_the_harness_cache_folder_is_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c;d"))
    with pytest.raises(UsageError, match=r"XDG_CACHE_HOME"):
        builder.build_harness(libs=type("L", (), {"cmake_args": lambda self: []})())
    assert list(tmp_path.iterdir()) == []


def test_ordinary_folders_pass():
    for p in ("/tmp/a b/suite", "/tmp/ümlaut-ß/suite", "/tmp/a,b(c)[d]{e}/s", "/tmp/a'b/s"):
        assert check_cmake_path(Path(p), "suite folder") == Path(p)


@pytest.mark.slow  # CMake's CUDA compiler check: 5 to 30 s
def test_a_semicolon_folder_left_nothing_beside_it_and_a_space_configures(tmp_path, layers):
    """The configure step for real: into ``a b`` it succeeds; into ``x;y`` it is refused and no
    stray ``x`` folder appears (before the fix CMake's compiler check wrote ``x/CMakeCUDACompiler.cmake.in``)."""
    from benanza.build.cudalibs import locate

    try:
        libs = locate()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA toolkit to configure with: {e}")
    bad = tmp_path / "x;y" / "suite"
    with pytest.raises(UsageError):
        generate(layers, ["fp32"], bad)
    ok = tmp_path / "a b" / "suite"
    generate(layers, ["fp32"], ok)
    (ok / "build").mkdir()
    builder._run([builder._cmake(), "-S", str(ok), "-B", str(ok / "build"), "-DBENANZA_HARNESS_LIBRARY=/none.a"]
                 + libs.cmake_args(), ok / "build" / "build.log", "suite configure")
    assert (ok / "build" / "CMakeCache.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a b"]
