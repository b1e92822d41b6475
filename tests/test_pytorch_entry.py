"""`benanza torch` without a GPU: module specs, the export with module names, a native profile on
the CPU joined through its module scopes, and the CLI's errors."""
import json
import subprocess
import sys

import pytest

from benanza.errors import UsageError
from benanza.processing.modules import _path_of_name, _path_of_scopes, module_paths, resolve
from conftest import REPO

FIXTURE = REPO / "tests" / "modules_fixture"


def test_module_names_from_both_exporters():
    # torch.export's metadata: qualified module names, then the ATen op
    assert _path_of_scopes("['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d_3']") == "layer1.0.conv1"
    assert _path_of_scopes("['', 'relu']") == ""
    assert _path_of_scopes("not a list") is None
    # the TorchScript exporter: scope components in the node name, qualified or not
    assert _path_of_name("/layer1/layer1.0/conv1/Conv") == "layer1.0.conv1"
    assert _path_of_name("/encoder/layers/encoder_layer_0/ln_1/LayerNormalization") == \
        "encoder.layers.encoder_layer_0.ln_1"
    assert _path_of_name("/Conv") == ""
    assert _path_of_name("node_Conv_12") is None


def test_bad_specs_are_one_line_usage_errors():
    with pytest.raises(UsageError, match="cannot import"):
        resolve("no_such_package_xyz.models:build")
    with pytest.raises(UsageError, match="no callable"):
        resolve("json:no_such_factory")
    with pytest.raises(UsageError, match="empty"):
        resolve("  ")


torch = pytest.importorskip("torch", reason="torch is not installed: the export and the native profile need it")


@pytest.fixture(scope="module")
def fixture_path():
    sys.path.insert(0, str(FIXTURE))
    yield FIXTURE
    sys.path.remove(str(FIXTURE))


@pytest.fixture(scope="module")
def exported(fixture_path, tmp_path_factory):
    from benanza.processing.modules import export_onnx

    src = resolve("tiny_models:build")
    return export_onnx(src, tmp_path_factory.mktemp("export") / "tiny.onnx")


def test_export_keeps_module_names_and_a_dynamic_batch(exported):
    from benanza.processing.model import process

    paths = module_paths(exported.path)
    convs = {n: p for n, p in paths.items() if "Conv" in n or p.endswith(("conv", "side", "stem", "bn"))}
    assert {"stem", "block1.side", "block2.side"} <= set(paths.values())
    assert any(p in ("block1.bn", "block1.conv") for p in paths.values()), convs  # the folded Conv+BN
    for b in (1, 3, 32):
        ml = process(exported.path, b)
        assert ml.layers[0].input_shapes[0][0] == b
    # the batch norm folded into its convolution keeps a bias: benanza benches the convolution a
    # trained model runs (random statistics were given to the untrained batch norms)
    ml = process(exported.path, 2)
    assert sum(1 for ly in ml.layers if ly.op_type == "Conv" and ly.config.bias) == 5
    assert "batch norms at their initial statistics" in " ".join(exported.notes)


def test_native_cpu_profile_joins_through_module_scopes(exported, fixture_path, tmp_path, monkeypatch):
    from benanza.profiles import capture_profile, load_profile
    from benanza.profiles.join import layer_paths, scope_of

    monkeypatch.setenv("PYTHONPATH", str(fixture_path))
    capture_profile(exported.path, 2, "fp32", tmp_path / "prof", device="cpu", warmup=1, runs=2, iterations=2,
                    logs=False, module={"spec": "tiny_models:build"})
    doc = json.loads((tmp_path / "prof" / "profile.json").read_text())
    assert doc["settings"]["run"] == "native" and doc["settings"].get("converter") is None
    p = load_profile(tmp_path / "prof", exported.path, 2)
    assert p.settings.run_label.endswith("eager, native module")
    paths = layer_paths(__import__("benanza.processing.model", fromlist=["process"]).process(exported.path, 2))
    convs = [lp for lp in p.layers if lp.op_type == "Conv"]
    assert convs and all(lp.op for lp in convs), [(lp.name, lp.op) for lp in convs]
    # every Conv op matched the layer of its own module (the side branch runs before the main one)
    tr = p.trace
    from benanza.profiles.join import join
    from benanza.processing.model import process

    jr = join(tr, process(exported.path, 2), paths)
    for om in jr.ops:
        if om.layer is not None and om.name == "aten::conv2d":
            scope = scope_of(tr, tr.cpu_ops[om.op])
            lp = paths[om.layer]
            assert scope.split(".")[0] == lp.split(".")[0], (scope, lp)
            if scope.endswith("side") or scope == "stem":
                assert lp == scope


def test_cli_refuses_a_bad_spec_in_one_line():
    r = subprocess.run([sys.executable, "-m", "benanza", "torch", "no_such_package_xyz:build", "--no-bench"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("benanza: ") and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "benanza", "torch", "resnet18", "--dtype", "fp64"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown data type" in r.stderr


def test_analyze_module_profiles_the_object_itself(fixture_path, tmp_path, monkeypatch):
    """benanza.analyze_module on a module object (no GPU: profiled on the CPU, nothing benched):
    the profiling process loads the very module (torch.save), and the insights say what ran."""
    import benanza
    from tiny_models import build, example_inputs

    monkeypatch.setenv("PYTHONPATH", str(fixture_path))
    m = build()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    res = benanza.analyze_module(m, example_inputs(4), batch=2, dtype="fp32", device="cpu", bench=False,
                                 db=str(REPO / "db" / "reference" / "h200_truth.sqlite.gz"), out=tmp_path / "w")
    assert len(res) == 1
    ins = res[0]  # the insights document, as `benanza torch` writes it
    assert ins["batch"] == 2 and ins["framework"].get("framework") == "pytorch"
    assert json.loads((tmp_path / "w" / "profile-b2-fp32" / "profile.json").read_text())["settings"]["run"] == "native"
    assert (tmp_path / "w" / "module.pt").exists() and (tmp_path / "w" / "net.onnx").exists()
    # the user's module is left as it was (the export works on a copy)
    assert all((before[k] == v).all() for k, v in m.state_dict().items())
