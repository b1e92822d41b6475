"""Only the GPU, PostgreSQL, torch and a headless browser may skip (issue 17): the categories the
final summary line uses, and BENANZA_CI=1 failing a run where anything else skipped."""
import os
import subprocess
import sys

from conftest import HERE, skip_category


def test_allowed_skip_reasons_have_their_category():
    assert skip_category("needs an NVIDIA GPU") == "GPU"
    assert skip_category("a CUDA device is present") == "GPU"
    assert skip_category("no PostgreSQL server (set BENANZA_TEST_PG_URL)") == "PostgreSQL"
    assert skip_category("could not import 'onnx2torch': No module named 'onnx2torch'") == "torch"
    assert skip_category("no headless browser (apt-get install chromium) for the HTML report test") == "browser"
    assert skip_category("the test models folder (tests/data/zoo/models) is not available") == "other"


def test_ci_fails_when_something_else_skips(tmp_path):
    probe = HERE / f"test_zz_skip_probe_{os.getpid()}.py"
    probe.write_text("import pytest\n\ndef test_probe():\n    pytest.skip('some data is missing')\n")
    try:
        env = {**os.environ, "BENANZA_CI": "1"}
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                           capture_output=True, text=True, env=env, cwd=HERE.parent)
        assert r.returncode == 1 and "benanza: skipped 1 other" in r.stdout and "not allowed to skip" in r.stdout
        env.pop("BENANZA_CI")
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                           capture_output=True, text=True, env=env, cwd=HERE.parent)
        assert r.returncode == 0
    finally:
        probe.unlink()
