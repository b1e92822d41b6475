"""InstanceNorm, the layer kind added as issue 16 promises (its module and its template; the registry finds the module):
ONNX InstanceNormalization in a real network's graph (the fast-neural-style transformer of Johnson et al.
2016, as pytorch/examples and the ONNX model zoo's style-transfer models have it), weight-stripped and
built here with onnx.helper; its jobs, case table, roofline bytes and a suite that compiles."""
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate, plan_jobs
from benanza.processing.model import process
from onnx_builders import HOSTILE

from conftest import scenario_of


def _stripped(name, shape):
    """A float32 initializer whose data lives in an external file that is not shipped (as the shared
    test models are stripped): its shape is known, its values are not."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(shape))
    t.data_location = TensorProto.EXTERNAL
    n = int(np.prod(shape)) * 4
    for k, v in (("location", "style.onnx.data"), ("offset", "0"), ("length", str(n))):
        t.external_data.add(key=k, value=v)
    return t


class _Net:
    """Builds the nodes and initializers of the fast-neural-style TransformerNet
    (pytorch/examples, fast_neural_style/neural_style/transformer_net.py)."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def conv(self, x, cin, cout, k, stride, upsample=False):
        """ConvLayer / UpsampleConvLayer: [nearest x2 upsampling], reflection pad k // 2, Conv."""
        self.n += 1
        i = self.n
        if upsample:
            self.inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), f"scales{i}"))
            self.nodes.append(helper.make_node("Resize", [x, "", f"scales{i}"], [f"up{i}"], name=f"upsample{i}",
                                               mode="nearest"))
            x = f"up{i}"
        p = k // 2
        self.inits += [numpy_helper.from_array(np.array([0, 0, p, p, 0, 0, p, p], np.int64), f"pads{i}"),
                       _stripped(f"conv{i}.weight", (cout, cin, k, k)), _stripped(f"conv{i}.bias", (cout,))]
        self.nodes.append(helper.make_node("Pad", [x, f"pads{i}"], [f"pad{i}"], name=f"reflection_pad{i}",
                                           mode="reflect"))
        self.nodes.append(helper.make_node("Conv", [f"pad{i}", f"conv{i}.weight", f"conv{i}.bias"], [f"conv{i}"],
                                           name=f"conv{i}", kernel_shape=[k, k], strides=[stride, stride]))
        return f"conv{i}"

    def norm(self, x, c, relu=True, name=None):
        """InstanceNorm2d(c, affine=True) [+ ReLU]."""
        i = self.n
        name = name or f"in{i}"
        self.inits += [_stripped(f"{name}.weight", (c,)), _stripped(f"{name}.bias", (c,))]
        self.nodes.append(helper.make_node("InstanceNormalization", [x, f"{name}.weight", f"{name}.bias"],
                                           [f"{name}.out"], name=name, epsilon=1e-5))
        if not relu:
            return f"{name}.out"
        self.nodes.append(helper.make_node("Relu", [f"{name}.out"], [f"relu{i}"], name=f"relu{i}"))
        return f"relu{i}"


def style_transfer_model(path, size=224):
    """The TransformerNet graph at opset 13 (batch dim symbolic 'N', input N x 3 x size x size): 15
    InstanceNormalizations (three distinct shapes), 16 Convs, 5 residual Adds, 2 nearest Resizes.
    The first InstanceNormalization has a hostile node name."""
    net = _Net()
    y = net.norm(net.conv("input", 3, 32, 9, 1), 32, name=HOSTILE)
    y = net.norm(net.conv(y, 32, 64, 3, 2), 64)
    y = net.norm(net.conv(y, 64, 128, 3, 2), 128)
    for r in range(5):
        h = net.norm(net.conv(y, 128, 128, 3, 1), 128)
        h = net.norm(net.conv(h, 128, 128, 3, 1), 128, relu=False)
        net.nodes.append(helper.make_node("Add", [h, y], [f"res{r}"], name=f"residual{r}"))
        y = f"res{r}"
    y = net.norm(net.conv(y, 128, 64, 3, 1, upsample=True), 64)
    y = net.norm(net.conv(y, 64, 32, 3, 1, upsample=True), 32)
    y = net.conv(y, 32, 3, 9, 1)
    graph = helper.make_graph(net.nodes, "transformer_net",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, size, size])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["N", 3, size, size])], net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    return path


def test_instance_norms_of_a_style_transfer_network_are_benchmarked(tmp_path):
    ml = process(style_transfer_model(tmp_path / "style.onnx"), 4)
    norms = [ly for ly in ml.layers if ly.op_type == "InstanceNormalization"]
    assert len(norms) == 15 and all(ly.status == "benchmark" and ly.config.kind == "InstanceNorm" for ly in norms)
    shapes = {ly.config.shape for ly in norms}
    assert shapes == {(4, 32, 224, 224), (4, 64, 112, 112), (4, 128, 56, 56)}
    cfg = L.REGISTRY["InstanceNorm"].config(shape=(4, 128, 56, 56), epsilon=float(np.float32(1e-5)))
    assert cfg in {ly.config for ly in norms} and cfg.instances == 512
    assert cfg.flops() == 8 * 4 * 128 * 56 * 56
    # x read and y written once, scale and B (128 each) read once: 2-byte data
    assert min_bytes(cfg, "fp16") == 2 * (2 * 4 * 128 * 56 * 56 + 2 * 128)
    # what benanza has no kind for is reported, not guessed: reflection pads; the nearest upsampling
    # (Resize-13, half_pixel, round_prefer_floor) is a Resize layer
    assert {ly.op_type for ly in ml.layers if ly.status == "unsupported"} == {"Pad"}
    assert all(ly.status == "benchmark" and ly.config.kind == "Resize" for ly in ml.layers if ly.op_type == "Resize")


def test_jobs_and_case_table(tmp_path):
    ml = process(style_transfer_model(tmp_path / "style.onnx"), 1)
    jobs = plan_jobs([ml], ["fp32", "fp16"], ["NCHW", "NHWC"])
    ins = [j for j in jobs if j.kind == "InstanceNorm"]
    # three shapes in two precisions; no NHWC job (ATen's instance_norm makes its input contiguous first)
    assert len(ins) == 6 and {j.layout for j in ins} == {"NCHW"}
    generate([ml], ["fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "instancenorm.cpp").read_text()
    assert "const InstanceNormCase kCases[] = {" in src and "cudnnBatchNormalizationForwardTraining" in src
    # (N, C, H, W) = (1, 32, 224, 224) is timed as (1, N*C, H, W)
    assert '"NCHW"}, {1, 32, 224, 224}, ' in src and '"NCHW"}, {1, 128, 56, 56}, ' in src
    assert src.count("Precision::FP16") == 3


@pytest.mark.parametrize("shape, view", [((2, 8, 10), [1, 16, 10, 1]), ((2, 8, 4, 5, 6), [1, 16, 120, 1])])
def test_one_and_three_spatial_dims_are_one_view(shape, view):
    kind = L.REGISTRY["InstanceNorm"]
    cfg = kind.config(shape=shape, epsilon=1e-3)
    from benanza.generation.generator import job_id
    from benanza.kinds.base import Job

    case = kind.case(cfg, Job(id=job_id(cfg, "fp32"), config=cfg, precision="fp32", node="n"))
    assert case.dims == "{" + ", ".join(map(str, view)) + "}" and case.epsilon == "0.001"


def test_a_rank_2_instance_norm_is_reported_not_guessed(tmp_path):
    g = helper.make_graph(
        [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="flat")], "flat",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [_stripped("s", (8,)), _stripped("b", (8,))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "flat.onnx"))
    ly = process(tmp_path / "flat.onnx", 2).layers[0]
    assert ly.status == "unsupported" and "rank-2" in ly.reason


@pytest.mark.slow
def test_the_style_transfer_suite_compiles_with_hostile_names(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    ml = process(style_transfer_model(tmp_path / "style.onnx"), 1)
    suite = generate([ml], ["fp32", "fp16", "bf16"], tmp_path / "s", kinds=["InstanceNorm"])
    src = (tmp_path / "s" / "src" / "instancenorm.cpp").read_text()
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src
    r = build(tmp_path / "s")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
    assert len(suite.jobs) == 9


def test_the_layers_command_names_the_kind(tmp_path):
    model = style_transfer_model(tmp_path / "style.onnx")
    p = subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", "layers", str(model),
                        "--batch", "2", "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    d = scenario_of(p.stdout, "layers")
    assert d["by_type"]["InstanceNormalization"] == {"count": 15, "unique": 3}
