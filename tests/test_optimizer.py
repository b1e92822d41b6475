"""The optimizer step (issue 26, benanza/kinds/optimizer.py): resnet50's parameters read from the ONNX
graph, the config's canonical key, the bandwidth bound and FLOPs by arithmetic, the update formulas
against PyTorch's single-tensor formulas (and torch.optim itself where PyTorch is installed), the
arena layout, the rendered case table, (a suite with an optimizer job compiles and links in test_training_step.py)."""
import json
import math
import random

import numpy as np
import pytest

from benanza import __version__
from benanza import kinds as L
from benanza.generation.generator import generate, jinja_env, job_id
from benanza.kinds.base import Job
from benanza.kinds.cpp import cpp_string
from benanza.kinds.optimizer import (ARENA_ALIGN_ELEMENTS, HYPER, STEP, OptimizerConfig, optimizer_bytes,
                                     reference_step)
from benanza.processing.model import process
from conftest import REPO
from onnx_builders import HOSTILE, all_kinds_model

#: the trainable parameters of examples/resnet50.onnx: torchvision's resnet50 trains 25,557,032,
#: and this inference-mode export folded its 53 BatchNormalizations into the convolutions (their
#: 2 x 26,560 scales and shifts became 26,560 convolution biases)
RESNET50_PARAMETERS = 25_557_032 - 2 * 26_560 + 26_560


def resnet50_parameter_shapes() -> list[tuple[int, ...]]:
    """The trainable parameter shapes of examples/resnet50.onnx, as the training step reads them
    (:func:`benanza.processing.training.trainable_parameters`)."""
    from benanza.processing.training import trainable_parameters

    return trainable_parameters(REPO / "examples" / "resnet50.onnx")


@pytest.fixture(scope="module")
def resnet50():
    return resnet50_parameter_shapes()


# ------------------------------------------------------------------------------- the config

def test_resnet50_has_its_25_5_million_parameters(resnet50):
    cfg = OptimizerConfig.from_parameters(resnet50, "adam")
    assert cfg.parameter_count == RESNET50_PARAMETERS
    assert len(cfg.parameters) == 108  # 53 conv weights and (folded) biases, fc weight and bias
    assert (1000, 2048) in cfg.parameters and (64, 3, 7, 7) in cfg.parameters
    assert cfg.batch_count == 1 and cfg.input_shapes() == list(cfg.parameters)


def test_the_key_does_not_depend_on_the_parameters_order(resnet50):
    a = OptimizerConfig.from_parameters(resnet50, "adamw")
    shuffled = list(resnet50)
    random.Random(26).shuffle(shuffled)
    b = OptimizerConfig.from_parameters(shuffled, "adamw")
    c = OptimizerConfig.from_parameters(reversed([list(s) for s in resnet50]), "adamw")
    assert shuffled != resnet50 and a == b == c and a.key == b.key == c.key
    assert a.parameters == tuple(sorted(resnet50))
    # a different model or algorithm is another key
    assert OptimizerConfig.from_parameters(resnet50[:-1], "adamw").key != a.key
    assert OptimizerConfig.from_parameters(resnet50, "adam").key != a.key
    assert OptimizerConfig.from_parameters(resnet50, "adam", amsgrad=True).key != \
        OptimizerConfig.from_parameters(resnet50, "adam").key
    # stored parameters rebuild it (the database's params column)
    again = L.config_from_params("Optimizer", json.loads(json.dumps(a.params())))
    assert again == a and again.key == a.key


def test_defaults_follow_torch_optim():
    shapes = [(4, 4)]
    sgd = OptimizerConfig.from_parameters(shapes, "sgd")
    assert sgd.momentum and not sgd.weight_decay and not sgd.nesterov  # "SGD with momentum"
    assert not OptimizerConfig.from_parameters(shapes, "adam").weight_decay  # Adam: weight_decay=0
    assert OptimizerConfig.from_parameters(shapes, "adamw").weight_decay  # AdamW: weight_decay=1e-2


@pytest.mark.parametrize("kwargs", [
    {"algorithm": "lamb"},
    {"algorithm": "sgd", "amsgrad": True},
    {"algorithm": "adam", "momentum": True},
    {"algorithm": "sgd", "nesterov": True, "momentum": False},
])
def test_flags_an_algorithm_has_not_are_refused(kwargs):
    with pytest.raises(ValueError):
        OptimizerConfig(parameters=((3,),), **kwargs)
    with pytest.raises(ValueError):
        OptimizerConfig(algorithm="sgd", parameters=((3, -1),))


# ------------------------------------------------------------------------- bound and FLOPs

def test_the_bandwidth_bound_of_adam_on_resnet50(resnet50):
    n = RESNET50_PARAMETERS
    adam = OptimizerConfig.from_parameters(resnet50, "adam")
    # param read + written (2), grad read (1), exp_avg read + written (2), exp_avg_sq read + written (2)
    assert optimizer_bytes(adam, 4, 4) == n * 4 * 7 == 714_853_216
    assert L.REGISTRY["Optimizer"].min_bytes(adam, 4, 4) == 714_853_216
    assert optimizer_bytes(adam, 2, 2) == n * 2 * 7  # fp16/bf16 parameters, state like them
    assert optimizer_bytes(OptimizerConfig.from_parameters(resnet50, "adamw"), 4, 4) == n * 4 * 7
    assert optimizer_bytes(OptimizerConfig.from_parameters(resnet50, "adam", amsgrad=True), 4, 4) == n * 4 * 9
    assert optimizer_bytes(OptimizerConfig.from_parameters(resnet50, "sgd"), 4, 4) == n * 4 * 5
    assert optimizer_bytes(OptimizerConfig.from_parameters(resnet50, "sgd", momentum=False), 4, 4) == n * 4 * 3


@pytest.mark.parametrize("algorithm,kwargs,per_element", [
    ("adam", {}, 13),                       # exp_avg 3, exp_avg_sq 4, denom 3, update 3
    ("adam", {"weight_decay": True}, 15),   # + grad += wd * param
    ("adam", {"amsgrad": True}, 14),        # + max
    ("adamw", {}, 15),                      # + param -= (lr * wd) * param
    ("sgd", {}, 5),                         # buf 3, update 2
    ("sgd", {"momentum": False}, 2),
    ("sgd", {"nesterov": True, "weight_decay": True}, 9),
])
def test_flops_per_element(resnet50, algorithm, kwargs, per_element):
    cfg = OptimizerConfig.from_parameters(resnet50, algorithm, **kwargs)
    assert cfg.flops_per_element() == per_element
    assert cfg.flops() == per_element * RESNET50_PARAMETERS


def test_the_step_is_bandwidth_bound_on_any_gpu(resnet50):
    """Adam's arithmetic intensity: 13 FLOPs per 28 bytes, far left of every GPU's ridge point."""
    cfg = OptimizerConfig.from_parameters(resnet50, "adam")
    assert cfg.flops() / optimizer_bytes(cfg, 4, 4) == pytest.approx(13 / 28)


# --------------------------------------------------------------------------- the formulas

def _torch_formulas(cfg, param, grad, state, h, step):
    """torch.optim's single-tensor formulas (torch/optim/sgd.py _single_tensor_sgd, adam.py
    _single_tensor_adam; AdamW = decoupled weight decay), written out in float64 numpy in their own
    form: lerp, mul_ + addcmul_, addcdiv_."""
    p, g = param.astype(np.float64), grad.astype(np.float64)
    st = [s.astype(np.float64) for s in state]
    if cfg.algorithm == "sgd":
        d_p = g + h["weight_decay"] * p if cfg.weight_decay else g
        if cfg.momentum:
            st[0] = st[0] * h["momentum"] + d_p * (1 - h["dampening"])       # buf.mul_(m).add_(d_p, alpha=1-d)
            d_p = d_p + h["momentum"] * st[0] if cfg.nesterov else st[0]   # d_p.add(buf, alpha=m)
        return p - h["lr"] * d_p, st                                      # param.add_(d_p, alpha=-lr)
    if cfg.weight_decay and cfg.algorithm == "adamw":
        p = p * (1 - h["lr"] * h["weight_decay"])                        # param.mul_(1 - lr * wd)
    elif cfg.weight_decay:
        g = g + h["weight_decay"] * p                                    # grad.add(param, alpha=wd)
    st[0] = st[0] + (g - st[0]) * (1 - h["beta1"])                       # exp_avg.lerp_(grad, 1 - beta1)
    st[1] = st[1] * h["beta2"] + g * g * (1 - h["beta2"])               # mul_(beta2).addcmul_(g, g, 1-beta2)
    v = st[1]
    if cfg.amsgrad:
        st[2] = np.maximum(st[2], st[1])
        v = st[2]
    step_size = h["lr"] / (1 - h["beta1"] ** step)
    denom = np.sqrt(v) / math.sqrt(1 - h["beta2"] ** step) + h["eps"]
    return p - step_size * st[0] / denom, st                             # addcdiv_(exp_avg, denom, -step_size)


CASES = [("sgd", {}), ("sgd", {"nesterov": True, "weight_decay": True}), ("sgd", {"momentum": False}),
         ("adam", {}), ("adam", {"weight_decay": True}), ("adam", {"amsgrad": True}), ("adamw", {}),
         ("adamw", {"amsgrad": True})]


def _state(cfg, rng, n):
    return ([rng.uniform(-0.1, 0.1, n).astype(np.float32)] +
            [rng.uniform(0.25, 1.0, n).astype(np.float32) for _ in range(cfg.state_buffers - 1)])


@pytest.mark.parametrize("algorithm,kwargs", CASES)
def test_the_kernel_formulas_are_torch_optims(algorithm, kwargs):
    """reference_step (the kernel's formulas, float32) after three steps matches torch.optim's
    formulas in float64 to float32 rounding; the update is not the identity (the test can fail)."""
    cfg = OptimizerConfig.from_parameters([(5000,)], algorithm, **kwargs)
    rng = np.random.default_rng(26)
    p = rng.uniform(-1, 1, 5000).astype(np.float32)
    state = _state(cfg, rng, 5000)
    p64, st64 = p.astype(np.float64), [s.astype(np.float64) for s in state]
    start = p.copy()
    for step in (STEP, STEP + 1, STEP + 2):
        g = rng.uniform(-1, 1, 5000).astype(np.float32)
        reference_step(cfg, p, g, state, step=step)
        p64, st64 = _torch_formulas(cfg, p64, g, st64, HYPER[algorithm], step)
    np.testing.assert_allclose(p, p64, rtol=1e-5, atol=1e-6)
    for s, s64 in zip(state, st64):
        np.testing.assert_allclose(s, s64, rtol=1e-5, atol=1e-7)
    assert np.abs(p - start).max() > 1e-4


def test_the_formulas_tell_the_variants_apart():
    """Adam's L2 decay and AdamW's decoupled decay, Nesterov and plain momentum give other updates."""
    rng = np.random.default_rng(1)
    p0, g = rng.uniform(-1, 1, 64).astype(np.float32), rng.uniform(-1, 1, 64).astype(np.float32)

    def after(algorithm, **kw):
        cfg = OptimizerConfig.from_parameters([(64,)], algorithm, **kw)
        state = _state(cfg, np.random.default_rng(2), 64)
        return reference_step(cfg, p0.copy(), g, state)
    assert not np.allclose(after("adam", weight_decay=True), after("adamw"), rtol=0, atol=1e-7)
    assert not np.allclose(after("sgd"), after("sgd", nesterov=True), rtol=0, atol=1e-7)


@pytest.mark.parametrize("algorithm,kwargs", CASES)
def test_the_formulas_match_torch_optim_itself(algorithm, kwargs):
    """Where PyTorch is installed: torch.optim's single-tensor step (foreach=False) on the CPU, with
    the state set as the suite sets it, agrees with reference_step."""
    torch = pytest.importorskip("torch")
    cfg = OptimizerConfig.from_parameters([(300,)], algorithm, **kwargs)
    h = HYPER[algorithm]
    rng = np.random.default_rng(3)
    p, g = rng.uniform(-1, 1, 300).astype(np.float32), rng.uniform(-1, 1, 300).astype(np.float32)
    state = _state(cfg, rng, 300)
    tp = torch.tensor(p.copy())
    tp.grad = torch.tensor(g)
    kw = {"lr": h["lr"], "weight_decay": h["weight_decay"] if cfg.weight_decay else 0.0, "foreach": False}
    if algorithm == "sgd":
        kw.update(momentum=h["momentum"] if cfg.momentum else 0.0, nesterov=cfg.nesterov)
        opt = torch.optim.SGD([tp], **kw)
        if cfg.momentum:
            opt.state[tp] = {"momentum_buffer": torch.tensor(state[0].copy())}
    else:
        kw.update(betas=(h["beta1"], h["beta2"]), eps=h["eps"], amsgrad=cfg.amsgrad)
        opt = getattr(torch.optim, {"adam": "Adam", "adamw": "AdamW"}[algorithm])([tp], **kw)
        names = ["exp_avg", "exp_avg_sq", "max_exp_avg_sq"][:cfg.state_buffers]
        opt.state[tp] = {"step": torch.tensor(float(STEP - 1)),
                         **{n: torch.tensor(s.copy()) for n, s in zip(names, state)}}
    opt.step()  # step STEP - 1 + 1
    reference_step(cfg, p, g, state, step=STEP)
    np.testing.assert_allclose(tp.numpy(), p, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- arena and case

def test_the_arena_aligns_every_parameter_for_16_byte_vectors(resnet50):
    cfg = OptimizerConfig.from_parameters(resnet50, "adam")
    offsets = cfg.arena_offsets()
    sizes = [math.prod(s) for s in cfg.parameters]
    assert all(o % ARENA_ALIGN_ELEMENTS == 0 for o in offsets)
    assert all(a + n <= b for a, n, b in zip(offsets, sizes, offsets[1:]))  # no overlap
    assert cfg.output_shape() == (cfg.arena_elements,)
    assert RESNET50_PARAMETERS <= cfg.arena_elements < RESNET50_PARAMETERS + ARENA_ALIGN_ELEMENTS * len(sizes)
    assert offsets[-1] + sizes[-1] <= cfg.arena_elements


def _render(configs, precisions=("fp32", "fp16", "bf16"), node=HOSTILE):
    kind = L.REGISTRY["Optimizer"]
    jobs = [Job(id=job_id(c, p), config=c, precision=p, node=node) for c in configs for p in precisions]
    cases = [kind.case(j.config, j) for j in jobs]
    return jobs, jinja_env().get_template(kind.template).render(cases=cases, version=__version__)


def test_the_case_table_holds_the_sizes_and_offsets(resnet50):
    cfg = OptimizerConfig.from_parameters(resnet50, "adam")
    jobs, text = _render([cfg])
    case = L.REGISTRY["Optimizer"].case(cfg, jobs[0])
    assert case.numels == "{" + ", ".join(str(math.prod(s)) for s in cfg.parameters) + "}"
    assert case.offsets == "{" + ", ".join(map(str, cfg.arena_offsets())) + "}"
    assert case.arena == cfg.arena_elements and case.algorithm == "OptimizerAlgo::ADAM"
    assert cpp_string(HOSTILE) in text and HOSTILE not in text
    assert text.count("OptimizerAlgo::ADAM,") == 3  # one row per precision


# ------------------------------------------------------------------------------- the build

def _suite_with_optimizer_jobs(tmp_path, configs, precisions):
    """A generated suite (the Dropout jobs of a small model) with the optimizer jobs of ``configs``
    added as the training step's expansion will add them: src/optimizer.cpp, the CMake source list,
    the manifest's jobs."""
    ml = process(all_kinds_model(tmp_path / "m.onnx"), 1)
    root = tmp_path / "s"
    suite = generate([ml], ["fp32"], root, kinds=["Dropout"])
    jobs, text = _render(configs, precisions)
    (root / "src" / "optimizer.cpp").write_text(text)
    from benanza.generation.generator import harness_sources

    sources = suite.manifest["sources"] + ["src/optimizer.cpp"]
    cmake = jinja_env().get_template("CMakeLists.txt.j2").render(sources=sources, version=__version__,
                                                                 harness_only=False, **harness_sources())
    (root / "CMakeLists.txt").write_text(cmake)
    manifest = dict(suite.manifest, sources=sources, jobs=suite.manifest["jobs"] + [j.to_dict() for j in jobs])
    (root / "suite.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return root, [j.id for j in suite.jobs] + [j.id for j in jobs]
