"""What a command imports before its work (issue "Answers in seconds"): ``benanza --help`` neither the layer
kinds, onnx nor SQLAlchemy, and ``benanza analyze`` of a model whose processed layers are cached not onnx
(importing it loads ml_dtypes: about half a second of every command). The layer kinds read ONNX's element
types from their own copy of the enum (``benanza.kinds.onnx_map.TP``), checked here against onnx's."""
from __future__ import annotations

import json
import subprocess
import sys

import onnx

from conftest import REPO
from benanza.kinds.onnx_map import TP, TYPE_NAMES, type_name


def test_the_element_types_are_onnx_own():
    ours = {k: v for k, v in vars(TP).items() if k.isupper()}
    assert ours == {k: v for k, v in onnx.TensorProto.DataType.items() if k in ours}
    assert len(ours) >= 24 and all(onnx.TensorProto.DataType.Name(v) == k for k, v in ours.items())
    assert type_name(TP.BFLOAT16) == "BFLOAT16" and type_name(999) == type_name(None) == "an unknown type"
    assert set(TYPE_NAMES.values()) == set(ours)


def _imports_after(argv: list[str], env: dict | None = None) -> set[str]:
    """The top-level packages imported by ``benanza ARGV`` run in a fresh interpreter."""
    code = ("import sys\nfrom benanza.cli.app import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print('\\n' + __import__('json').dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return set(json.loads(r.stdout.strip().splitlines()[-1]))


def test_help_imports_no_layer_kind_nor_onnx():
    mods = _imports_after(["--help"])
    assert not mods & {"onnx", "ml_dtypes", "sqlalchemy", "numpy"}, mods


def test_a_warm_analyze_imports_no_onnx(tmp_path):
    import os

    env = {**os.environ, "BENANZA_MODEL_CACHE": str(tmp_path / "cache")}
    argv = ["analyze", "db/reference/truth/swin_t.onnx", "-b", "32", "-t", "fp16", "--db",
            "db/reference/h200_truth.sqlite.gz", "--no-layers"]
    assert "onnx" in _imports_after(argv, env)  # cold: the model is read and processed
    mods = _imports_after(argv, env)
    assert "onnx" not in mods and "ml_dtypes" not in mods, mods
