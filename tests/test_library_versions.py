"""torch's older cuDNN and cuBLAS (issue 53, item 14's last part): installing torch 2.11 replaces
benanza's newer wheels with its pinned ones (docs/install.md). Before a measurement on this machine
(`run`, `bench`, `ceilings`) and in `benanza system`, benanza compares the cuDNN and cuBLAS a suite
loads (:func:`benanza.runner.system.library_versions`) with the ones it is built with
(:data:`benanza.versions.BUILT_WITH`, inside pyproject.toml's ranges) and prints one ``notice:`` line
on stderr when one is older, naming both versions and what follows. No GPU here: the reader is
replaced by torch 2.11's versions, and `run` drives the fake suite (tests/fake_suite.py)."""
import tomllib

import pytest
from packaging.requirements import Requirement

from benanza.versions import BUILT_WITH, older_libraries, version_text
from conftest import REPO, make_fake_suite

#: what torch 2.11 installs (docs/install.md): nvidia-cudnn-cu13 9.19.0.56, nvidia-cublas 13.1.0.3
TORCH_211 = {"cudnn_version": 91900, "cublas_version": 130100}


def test_the_versions_benanza_is_built_with_are_inside_its_pinned_ranges():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = {Requirement(d).name: Requirement(d).specifier for d in deps}
    assert spec["nvidia-cudnn-cu13"].contains(version_text("cudnn", BUILT_WITH["cudnn"]))
    assert spec["nvidia-cublas"].contains(version_text("cublas", BUILT_WITH["cublas"]))


def test_torchs_older_libraries_are_one_notice_naming_both_versions_and_what_follows():
    line = older_libraries(TORCH_211)
    assert line == ("cuDNN 9.19.0 and cuBLAS 13.1.0 here are older than the 9.28.1 and 13.10.0 benanza is built "
                    "with (installing torch replaces benanza's wheels with its pinned ones, docs/install.md); "
                    "these timings are of cuDNN 9.19.0 and cuBLAS 13.1.0, stored as a system of their own")
    one = older_libraries({"cudnn_version": BUILT_WITH["cudnn"], "cublas_version": 130100})
    assert one.startswith("cuBLAS 13.1.0 here is older than the 13.10.0 benanza is built with") and \
        one.endswith("these timings are of cuBLAS 13.1.0, stored as a system of its own") and "cuDNN" not in one
    assert "\n" not in line


@pytest.mark.parametrize("loaded", [
    {"cudnn_version": BUILT_WITH["cudnn"], "cublas_version": BUILT_WITH["cublas"]},  # benanza's own
    {"cudnn_version": 92900, "cublas_version": 131100},  # newer
    {"cudnn_version": 0, "cublas_version": None},  # unknown: not found
    {"cudnn_library": None, "cublas_library": None},  # neither library found
], ids=["same", "newer", "unknown", "missing"])
def test_no_notice_for_the_same_newer_or_unknown_libraries(loaded):
    assert older_libraries(loaded) is None


def _stderr(args):
    from typer.testing import CliRunner

    from benanza.cli import app

    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.stderr


def test_run_says_once_that_its_timings_are_of_torchs_older_libraries(tmp_path, models, monkeypatch):
    from benanza.runner import system

    suite = make_fake_suite(tmp_path / "suite", models / "alexnet.onnx", (1,), ("fp32",))
    monkeypatch.setattr(system, "library_versions", lambda nat=None: dict(TORCH_211))
    rc, err = _stderr(["run", suite, "--db", tmp_path / "a.db"])
    assert rc == 0, err
    assert [ln for ln in err.splitlines() if "older than" in ln] == [f"notice: {older_libraries(TORCH_211)}"]
    monkeypatch.setattr(system, "library_versions", lambda nat=None: {"cudnn_version": 92801, "cublas_version": 131000})
    rc, err = _stderr(["run", suite, "--db", tmp_path / "b.db"])
    assert rc == 0 and "older than" not in err, err


def test_benanza_system_shows_the_libraries_and_the_notice(monkeypatch):
    from benanza.runner import system

    real = system.library_versions()
    if "cudnn_version" not in real:
        pytest.skip(f"no cuDNN or cuBLAS found here ({real})")
    rc, err = _stderr(["system"])
    assert rc == 0
    from typer.testing import CliRunner

    from benanza.cli import app

    out = CliRunner().invoke(app, ["system"]).stdout
    assert f"cudnn_version: {version_text('cudnn', real['cudnn_version'])}" in out
    assert f"cublas_version: {version_text('cublas', real['cublas_version'])}" in out
    assert ("older than" in err) == (older_libraries(real) is not None), err
    monkeypatch.setattr(system, "library_versions", lambda nat=None: dict(TORCH_211, cudnn_library="x", cublas_library="y"))
    r = CliRunner().invoke(app, ["system"])
    assert "cudnn_version: 9.19.0" in r.stdout and "cublas_version: 13.1.0" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == f"notice: {older_libraries(TORCH_211)}"
