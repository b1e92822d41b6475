"""The convolution's backward pass (issue 26): ConvBwdData (dx, cudnnConvolutionBackwardData and the
graph API's conv_dgrad) and ConvBwdFilter (dw and the bias gradient, cudnnConvolutionBackwardFilter +
cudnnConvolutionBackwardBias and conv_wgrad), expanded from resnet50's real convolutions through
``REGISTRY['Conv'].backward``; their shapes, FLOPs and bytes against arithmetic done here, their keys,
the case tables (the suite that compiles and links: test_training_step.py)."""
import json

from benanza import kinds as L
from benanza.generation import generator
from benanza.generation.generator import generate, job_id, plan_jobs
from benanza.kinds.base import Job
from benanza.kinds.bounds import min_bytes
from benanza.processing.model import process
from conftest import REPO

RESNET50 = REPO / "examples" / "resnet50.onnx"


def _convs(batch):
    ml = process(RESNET50, batch)
    return ml, {ly.config for ly in ml.layers if ly.config is not None and ly.config.kind == "Conv"}


def _find(convs, x, w, stride):
    [c] = [c for c in convs if c.x == x and c.w == w and c.strides == stride]
    return c


def _backward(cfg):
    calls = L.REGISTRY[cfg.kind].backward(cfg)
    assert [phase for phase, _ in calls] == ["backward_data", "backward_weight"]
    return calls[0][1], calls[1][1]


def test_a_3x3_convolution_of_resnet50():
    _, convs = _convs(32)
    conv = _find(convs, (32, 64, 56, 56), (64, 64, 3, 3), (1, 1))
    assert conv.pads == (1, 1, 1, 1) and conv.bias and conv.group == 1
    dx, dw = _backward(conv)
    assert (dx.kind, dw.kind) == ("ConvBwdData", "ConvBwdFilter")
    dy = (32, 64, 56, 56)  # 'same' padding at stride 1
    assert dx.input_shapes() == [dy, (64, 64, 3, 3)] and dx.output_shape() == (32, 64, 56, 56)
    assert dw.input_shapes() == [(32, 64, 56, 56), dy] and dw.output_shape() == (64, 64, 3, 3)
    macs = 32 * 64 * 56 * 56 * 64 * 9
    # at stride 1 the transposed convolution's count is the forward's: N*C*H*W * K * kh*kw
    assert dx.flops() == 2 * macs == 2 * (32 * 64 * 56 * 56) * 64 * 9
    assert dw.flops() == 2 * macs + 32 * 64 * 56 * 56  # + the bias gradient's adds, one per dy element
    # dy and w read, dx written; x and dy read, dw and db written (2-byte fp16, 4-byte fp32)
    assert min_bytes(dx, "fp16") == 2 * (32 * 64 * 56 * 56 + 64 * 64 * 9 + 32 * 64 * 56 * 56)
    assert min_bytes(dw, "fp32") == 4 * (2 * 32 * 64 * 56 * 56 + 64 * 64 * 9 + 64)
    assert dx.batch_count == dw.batch_count == 32


def test_a_strided_1x1_convolution_of_resnet50():
    _, convs = _convs(32)
    conv = _find(convs, (32, 256, 56, 56), (512, 256, 1, 1), (2, 2))
    dx, dw = _backward(conv)
    dy = (32, 512, 28, 28)
    assert conv.output_shape() == dy and dx.input_shapes()[0] == dy and dw.input_shapes()[1] == dy
    assert dx.output_shape() == (32, 256, 56, 56) and dw.output_shape() == (512, 256, 1, 1)
    macs = 32 * 512 * 28 * 28 * 256
    # the forward's multiply-adds, not the zero-upsampled transposed convolution's (4x at stride 2)
    assert dx.flops() == 2 * macs and dx.flops() * 4 == 2 * 32 * 256 * 56 * 56 * 512
    assert dw.flops() == 2 * macs + 32 * 512 * 28 * 28
    assert min_bytes(dx, "fp32") == 4 * (32 * 512 * 28 * 28 + 512 * 256 + 32 * 256 * 56 * 56)
    assert min_bytes(dw, "bf16") == 2 * (32 * 256 * 56 * 56 + 32 * 512 * 28 * 28 + 512 * 256 + 512)
    assert dx.describe() == "ConvBwdData(32x256x56x56 k512 1x1 s2,2)"
    assert dw.describe() == "ConvBwdFilter(32x256x56x56 k512 1x1 s2,2 bias)"


def test_keys_are_distinct_stable_and_rebuilt_from_their_parameters():
    ml, convs = _convs(32)
    back = [cfg for c in convs for cfg in _backward(c)]
    fwd_keys = {c.key for c in convs}
    assert len({b.key for b in back}) == 2 * len(convs) == 46
    assert not fwd_keys & {b.key for b in back}
    assert {b.key.split("-")[0] for b in back} == {"convbwddata", "convbwdfilter"}
    for b in back:
        again = L.config_from_params(b.kind, json.loads(json.dumps(b.params())))
        assert again == b and again.key == b.key
    # the data gradient leaves the bias out: a convolution with and without one shares its dx config
    conv = next(iter(convs))
    import dataclasses
    nobias = dataclasses.replace(conv, bias=False)
    assert _backward(conv)[0].key == _backward(nobias)[0].key
    assert _backward(conv)[1].key != _backward(nobias)[1].key
    # the fused Conv+bias+Relu of a fusion candidate has its convolution's two backward calls
    fused = [f.config for f in ml.fusions if f.config.kind == "ConvBiasAct"]
    assert fused and all(_backward(f) == _backward(f.conv) for f in fused)
    assert {cfg.key for f in fused for cfg in _backward(f)} <= {b.key for b in back}


def test_pytorch_fp32_runs_backward_convolutions_in_tf32():
    assert {"ConvBwdData", "ConvBwdFilter"} <= set(L.CUDNN_TF32_KINDS)
    _, convs = _convs(1)
    dx, dw = _backward(next(iter(convs)))
    assert L.precisions_for(dx, ["tf32"]) == ["tf32", "fp32"] and dx.tensor_cores and dw.tensor_cores


def _backward_jobs(models, precisions, layouts, conv_precision=None, train=False, optimizer="sgd"):
    """plan_jobs's jobs and the backward jobs of every convolution of ``models``, the stem's data
    gradient included (``--train`` leaves it out: it reads the model input; planned here so that the
    kinds' templates render every case). ``train`` and ``optimizer`` are ignored."""
    jobs = plan_jobs(models, precisions, layouts, conv_precision)
    seen = {j.id for j in jobs}
    for ml in models:
        for ly in ml.benchmarked():
            if ly.config.kind != "Conv":
                continue
            for _, cfg in L.REGISTRY["Conv"].backward(ly.config):
                for p in L.precisions_for(cfg, precisions):
                    for lay in layouts or ["NCHW"]:
                        jid = job_id(cfg, p, lay)
                        if jid not in seen:
                            seen.add(jid)
                            jobs.append(Job(id=jid, config=cfg, precision=p, node=ly.name, layout=lay))
    return jobs


def test_case_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(generator, "plan_jobs", _backward_jobs)
    ml, _ = _convs(1)
    suite = generate([ml], ["fp16"], tmp_path / "s", layouts=["NCHW", "NHWC"], kinds=["ConvBwdData", "ConvBwdFilter"])
    assert {j.kind for j in suite.jobs} == {"ConvBwdData", "ConvBwdFilter"}
    assert len(suite.jobs) == 2 * 23 * 2  # 23 unique convolutions, two gradients, two layouts
    data = (tmp_path / "s" / "src" / "convbwddata.cpp").read_text()
    filt = (tmp_path / "s" / "src" / "convbwdfilter.cpp").read_text()
    assert "cudnnConvolutionBackwardData(" in data and "ConvGrad::DATA" in data
    # the bias gradient: cudnnConvolutionBackwardBias, in bf16 benanza's reduction (engines.hpp's ConvBiasGrad)
    assert "cudnnConvolutionBackwardFilter(" in filt and "bias_grad->run(dy, db, stream)" in filt
    # the strided 1x1 convolution: dx's dims are the forward's input, the bias is off for dx and on for dw
    row = ', 2, {1, 256, 56, 56, 0}, {512, 256, 1, 1, 0}, {0, 0, 0}, {2, 2, 1}, {1, 1, 1}, 1, '
    assert row + 'false, ""}' in data and row + 'true, ""}' in filt
    assert data.count('"NHWC"}') == data.count('"NCHW"}') == 23


def test_the_filter_gradient_source_compiles_with_its_bias_gradient(tmp_path, monkeypatch):
    """The generated weight-gradient source (its bias gradient through ConvBiasGrad: cuDNN's, or in bf16,
    which cudnnConvolutionBackwardBias refuses, benanza's reduction) and the harness's engines.cpp
    without cudnn-frontend pass g++ -fsyntax-only -Wall -Werror against the cuDNN headers (with the
    frontend, engines.cpp compiles in the session's harness build: tests/test_harness_build.py)."""
    import subprocess

    from benanza.build.cudalibs import LibraryError, locate

    try:
        libs = locate()
    except LibraryError as e:
        pytest.skip(f"no CUDA headers: {e}")
    monkeypatch.setattr(generator, "plan_jobs", _backward_jobs)
    ml, _ = _convs(1)
    generate([ml], ["bf16"], tmp_path / "s", layouts=["NCHW", "NHWC"], kinds=["ConvBwdFilter"])
    root = tmp_path / "s"
    src = (root / "src" / "convbwdfilter.cpp").read_text()
    assert "bias_grad.emplace(b, dt, nd, yd.data(), c.w[0], false)" in src and "true, \"\"}" in src
    inc = [f"-I{root / 'harness' / 'include'}", f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}",
           f"-I{libs.cuda_home / 'include'}"]
    base = ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-Wno-deprecated-declarations"] + inc
    subprocess.run(base + [str(root / "src" / "convbwdfilter.cpp")], check=True)
    subprocess.run(base + ["-DBENANZA_WITH_FRONTEND=0", str(root / "harness" / "src" / "engines.cpp")], check=True)
