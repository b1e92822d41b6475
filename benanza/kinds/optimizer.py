"""The optimizer step of a training step (docs/training.md): SGD (with momentum), Adam and AdamW over every
parameter of a model, as PyTorch runs them.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidates and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`). No ONNX
op maps to it (``onnx`` is empty, its phase is ``optimizer``): its config is built from the model's
parameter shapes (:meth:`OptimizerConfig.from_parameters`).

The update formulas are PyTorch's (torch 2.x): ``torch/optim/sgd.py`` (``_single_tensor_sgd``,
``_multi_tensor_sgd``), ``torch/optim/adam.py`` (``_single_tensor_adam``, ``_multi_tensor_adam``;
AdamW is Adam with ``decoupled_weight_decay``, ``torch/optim/adamw.py``) and their fused CUDA kernels
(``aten/src/ATen/native/cuda/fused_adam_utils.cuh``, ``FusedSgdKernel.cu``). :func:`reference_step`
writes them once, in numpy, element by element as ``benanza::optimizer_step``
(``cpp/src/optimizer_kernels.cu``) computes them.

Storage: parameters, gradients and optimizer state in one element type, the job's precision's
storage type (fp32 for fp32/tf32, fp16, bf16), math in float32. That is what ``torch.optim``
runs for parameters of that dtype (its state is ``torch.zeros_like(param)``; the fused kernels
compute in float32 "opmath"), and what benanza's framework candidate allocates. PyTorch AMP (autocast)
keeps float32 parameters and state whatever the compute dtype, so the optimizer step of an AMP
training step is this kind's **fp32** job; the fp16/bf16 jobs are the step of a model whose
parameters are stored in that dtype (``model.half()``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Iterable

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported
from benanza.spec import OPTIMIZERS

#: the algorithms (``torch.optim.SGD``, ``torch.optim.Adam``, ``torch.optim.AdamW``: :data:`benanza.spec.OPTIMIZERS`)
OPTIMIZER_ALGORITHMS = tuple(OPTIMIZERS)

#: every parameter tensor starts at a multiple of this many elements in the arena the suite and the
#: PyTorch candidate allocate (16 bytes at 2 bytes per element, 32 at 4): aligned for 16-byte vector
#: loads in every precision, as PyTorch's multi_tensor_apply wants for its vectorised path
ARENA_ALIGN_ELEMENTS = 8
#: elements of one chunk of the multi-tensor kernel (one CUDA block each), PyTorch's
#: ``kChunkSize`` of ``aten/src/ATen/native/cuda/MultiTensorApply.cuh``
CHUNK_ELEMENTS = 65536

#: the hyper-parameters of the timed step (they change no work: only which terms exist, the flags
#: of the config, does): PyTorch's defaults (lr 1e-3, betas (0.9, 0.999), eps 1e-8, AdamW weight
#: decay 1e-2), SGD at lr 0.01 with momentum 0.9 (the torchvision ImageNet recipe's 0.1 would do
#: as well), weight decay 1e-2 wherever its flag is set, dampening 0; ``step``: the step whose bias
#: corrections Adam applies (a step of steady training: the state exists, unlike PyTorch's first
#: step, where SGD copies the gradient into its momentum buffer)
#: (:attr:`benanza.spec.Optimizer.timed`)
HYPER = {o.name: dict(o.timed) for o in OPTIMIZERS.values()}
STEP = 10


def _canonical_shapes(shapes: Iterable) -> tuple[Shape, ...]:
    out = []
    for s in shapes:
        shape = tuple(int(d) for d in s)
        if any(d < 0 for d in shape):
            raise ValueError(f"parameter shape {shape} has a negative dim")
        out.append(shape)
    return tuple(sorted(out))


@dataclass(frozen=True)
class OptimizerConfig(LayerConfig):
    """One optimizer step over every parameter of a model: ``algorithm`` (sgd, adam, adamw) with the
    flags that change its work (``momentum``: SGD's momentum != 0, one state buffer; ``nesterov``:
    SGD's Nesterov momentum; ``weight_decay``: weight_decay != 0 (SGD and Adam: L2 added to the
    gradient; AdamW: decoupled, applied to the parameter); ``amsgrad``: Adam(W)'s max of the second
    moments, a third state buffer) and ``parameters``, the shapes of the model's parameter tensors,
    sorted (canonical: two models with the same parameters in another order share the key).

    FLOPs per element (:meth:`flops_per_element`), counting each add, multiply, divide, square root
    and max as one, the formulas as PyTorch's fused kernels write them (``FusedSgdKernel.cu``,
    ``fused_adam_utils.cuh``; the for-each path does the same arithmetic in several launches):

    - SGD: ``param -= lr * grad``: 2; momentum ``buf = momentum * buf + (1 - dampening) * grad``: +3;
      nesterov ``grad += momentum * buf``: +2; weight decay ``grad += weight_decay * param``: +2.
    - Adam/AdamW: ``exp_avg = beta1 * exp_avg + (1 - beta1) * grad`` (3), ``exp_avg_sq = beta2 *
      exp_avg_sq + (1 - beta2) * grad * grad`` (4), ``denom = sqrt(exp_avg_sq) / sqrt(bias_correction2)
      + eps`` (3), ``param -= step_size * exp_avg / denom`` (3): 13 (step_size = lr / bias_correction1
      and the bias corrections are per-step scalars); amsgrad ``max_exp_avg_sq = max(max_exp_avg_sq,
      exp_avg_sq)``: +1; weight decay, Adam ``grad += weight_decay * param``: +2, AdamW ``param -=
      (lr * weight_decay) * param``: +2.

    Raises ValueError for an unknown algorithm, a flag the algorithm has not, or a negative dim.
    """

    kind: ClassVar[str] = "Optimizer"
    algorithm: str
    parameters: tuple[Shape, ...]
    momentum: bool = False
    nesterov: bool = False
    weight_decay: bool = False
    amsgrad: bool = False

    def __post_init__(self):
        if self.algorithm not in OPTIMIZER_ALGORITHMS:
            raise ValueError(f"optimizer algorithm {self.algorithm!r} is not one of {', '.join(OPTIMIZER_ALGORITHMS)}")
        object.__setattr__(self, "parameters", _canonical_shapes(self.parameters))
        for flag in ("momentum", "nesterov", "weight_decay", "amsgrad"):
            object.__setattr__(self, flag, bool(getattr(self, flag)))
        if self.algorithm == "sgd" and self.amsgrad:
            raise ValueError("amsgrad is an Adam/AdamW flag, not SGD's")
        if self.algorithm != "sgd" and (self.momentum or self.nesterov):
            raise ValueError(f"momentum/nesterov are SGD flags, not {self.algorithm}'s (its betas always apply)")
        if self.nesterov and not self.momentum:
            raise ValueError("Nesterov momentum requires momentum (torch.optim.SGD raises the same)")

    @classmethod
    def from_parameters(cls, shapes: Iterable, algorithm: str, *, momentum: bool | None = None,
                        nesterov: bool = False, weight_decay: bool | None = None,
                        amsgrad: bool = False) -> "OptimizerConfig":
        """The step of ``algorithm`` over parameters of ``shapes`` (any order). Defaults: SGD with
        momentum (the issue's "SGD with momentum"), no weight decay for SGD and Adam, AdamW's default
        weight decay (1e-2 in torch.optim.AdamW, so the flag is on). Raises ValueError as the config."""
        return cls(algorithm=algorithm, parameters=tuple(shapes),
                   momentum=(algorithm == "sgd") if momentum is None else momentum, nesterov=nesterov,
                   weight_decay=(algorithm == "adamw") if weight_decay is None else weight_decay, amsgrad=amsgrad)

    @property
    def batch_count(self) -> int:
        """1: one step over every parameter (no batch)."""
        return 1

    @property
    def parameter_count(self) -> int:
        """Elements of all parameters (torchvision resnet50: 25,557,032; examples/resnet50.onnx, its
        BatchNorms folded: 25,530,472)."""
        return sum(numel(s) for s in self.parameters)

    @property
    def state_buffers(self) -> int:
        """Optimizer state tensors per parameter: SGD 0 (1 with momentum), Adam/AdamW 2 (exp_avg,
        exp_avg_sq; 3 with amsgrad's max_exp_avg_sq)."""
        if self.algorithm == "sgd":
            return int(self.momentum)
        return 2 + int(self.amsgrad)

    def arena_offsets(self) -> list[int]:
        """Each parameter's first element in the arena (in the canonical order), a multiple of
        :data:`ARENA_ALIGN_ELEMENTS`."""
        out, at = [], 0
        for s in self.parameters:
            out.append(at)
            at += -(-numel(s) // ARENA_ALIGN_ELEMENTS) * ARENA_ALIGN_ELEMENTS
        return out

    @property
    def arena_elements(self) -> int:
        """Elements of the arena: the parameters, each padded to :data:`ARENA_ALIGN_ELEMENTS`."""
        return sum(-(-numel(s) // ARENA_ALIGN_ELEMENTS) * ARENA_ALIGN_ELEMENTS for s in self.parameters)

    def input_shapes(self):
        """The parameters (the gradients have the same shapes)."""
        return list(self.parameters)

    def output_shape(self):
        """(arena elements,): the updated parameters in their arena (each padded to a multiple of
        :data:`ARENA_ALIGN_ELEMENTS`; :attr:`parameter_count` without the padding), what the
        PyTorch candidate returns."""
        return (self.arena_elements,)

    def flops_per_element(self) -> int:
        """FLOPs of the update of one parameter element (the class docstring gives each term)."""
        if self.algorithm == "sgd":
            return 2 + 3 * self.momentum + 2 * self.nesterov + 2 * self.weight_decay
        return 13 + int(self.amsgrad) + 2 * self.weight_decay

    def flops(self) -> int:
        return self.flops_per_element() * self.parameter_count

    def describe(self) -> str:
        flags = [f for f in ("momentum", "nesterov", "weight_decay", "amsgrad") if getattr(self, f)]
        return (f"Optimizer({self.algorithm}{' ' + '+'.join(flags) if flags else ''}: "
                f"{len(self.parameters)} tensors, {self.parameter_count} parameters)")


def optimizer_bytes(cfg: OptimizerConfig, ib: int, ob: int) -> int:
    """The step's bandwidth bound: every parameter read and written, its gradient read, each state
    buffer read and written, ``ib`` bytes per element (parameters, gradients and state share the
    storage type, the module docstring says why; ``ob`` is the same). Adam in fp32: 7 x 4 bytes
    per parameter (param 2, grad 1, exp_avg 2, exp_avg_sq 2); SGD with momentum: 5 x 4."""
    return cfg.parameter_count * ib * (3 + 2 * cfg.state_buffers)


def reference_step(cfg: OptimizerConfig, param, grad, state: list, hyper: dict | None = None, step: int = STEP):
    """One step of ``cfg``'s algorithm on numpy float32 arrays, updated in place, element by
    element as ``benanza::optimizer_step`` (cpp/src/optimizer_kernels.cu) computes it: ``state``
    is [momentum_buffer] (SGD with momentum), [exp_avg, exp_avg_sq] (+ max_exp_avg_sq with amsgrad)
    or []; ``hyper`` defaults to :data:`HYPER` of the algorithm. The formulas of the class docstring
    (PyTorch's fused kernels); ``tests/test_optimizer.py`` checks them against torch.optim's
    single-tensor formulas written out."""
    import numpy as np

    h = {**HYPER[cfg.algorithm], **(hyper or {})}
    f32 = np.float32
    g = grad.astype(f32).copy()
    if cfg.algorithm == "sgd":
        if cfg.weight_decay:
            g += f32(h["weight_decay"]) * param
        if cfg.momentum:
            buf = state[0]
            buf[...] = f32(h["momentum"]) * buf + f32(1 - h["dampening"]) * g
            g = g + f32(h["momentum"]) * buf if cfg.nesterov else buf.copy()
        param -= f32(h["lr"]) * g
        return param
    lr, b1, b2, eps = (f32(h[k]) for k in ("lr", "beta1", "beta2", "eps"))
    if cfg.weight_decay:
        if cfg.algorithm == "adamw":
            param -= f32(h["lr"] * h["weight_decay"]) * param
        else:
            g += f32(h["weight_decay"]) * param
    exp_avg, exp_avg_sq = state[0], state[1]
    exp_avg[...] = b1 * exp_avg + (f32(1) - b1) * g
    exp_avg_sq[...] = b2 * exp_avg_sq + (f32(1) - b2) * g * g
    v = exp_avg_sq
    if cfg.amsgrad:
        np.maximum(state[2], exp_avg_sq, out=state[2])
        v = state[2]
    step_size = f32(h["lr"] / (1 - h["beta1"] ** step))
    bc2_sqrt = f32(math.sqrt(1 - h["beta2"] ** step))
    denom = np.sqrt(v) / bc2_sqrt + eps
    param -= step_size * exp_avg / denom
    return param


@dataclass(frozen=True)
class OptimizerCase(Case):
    """One row of ``templates/optimizer.cpp.j2``'s case table: the fields of its C++ ``OptimizerCase``
    in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    algorithm: CppValue
    momentum: CppValue
    dampening: CppValue
    weight_decay: CppValue
    nesterov: CppValue
    amsgrad: CppValue
    lr: CppValue
    beta1: CppValue
    beta2: CppValue
    eps: CppValue
    step: CppValue
    numels: CppValue
    offsets: CppValue
    arena: CppValue
    label: CppValue


def _optimizer_case(cfg: OptimizerConfig, job: Job) -> OptimizerCase:
    h = HYPER[cfg.algorithm]
    return OptimizerCase(
        job=job_init(job), algorithm=OPTIMIZERS[cfg.algorithm].cpp,
        momentum=cpp_num(h["momentum"] if cfg.momentum else 0.0), dampening=cpp_num(h.get("dampening", 0.0)),
        weight_decay=cpp_num(h["weight_decay"] if cfg.weight_decay else 0.0), nesterov=cpp_num(cfg.nesterov),
        amsgrad=cpp_num(cfg.amsgrad), lr=cpp_num(h["lr"]), beta1=cpp_num(h.get("beta1", 0.0)),
        beta2=cpp_num(h.get("beta2", 0.0)), eps=cpp_num(h.get("eps", 0.0)), step=STEP,
        numels=c_array(numel(s) for s in cfg.parameters), offsets=c_array(cfg.arena_offsets()),
        arena=cfg.arena_elements, label=cpp_string(cfg.describe()))


# ----------------------------------------------------------------------------- PyTorch

#: torch.optim's class of each algorithm (:attr:`benanza.spec.Optimizer.torch_class`)
_TORCH_CLASS = {o.name: o.torch_class for o in OPTIMIZERS.values()}


def _torch_optimizer(c: Ctx, impl: str):
    """``torch.optim.<Algorithm>`` over the config's parameters as views of one arena (each at its
    :meth:`OptimizerConfig.arena_offsets`, gradients set, state created by one untimed step and then
    refilled so every value is finite in fp16 too), ``foreach=True`` or ``fused=True`` (Adam/AdamW
    ``capturable=True`` on a GPU: a step torch.optim lets a CUDA graph capture; SGD has no step
    state and is always capturable): (optimizer, arena)."""
    torch, cfg = c.torch, c.cfg
    h = HYPER[cfg.algorithm]
    arena = c.randn((cfg.arena_elements,))
    grads = c.randn((cfg.arena_elements,))
    params = []
    for shape, at in zip(cfg.parameters, cfg.arena_offsets()):
        p = arena[at:at + numel(shape)].view(shape).detach().requires_grad_(True)
        p.grad = grads[at:at + numel(shape)].view(shape)
        params.append(p)
    kw = {"lr": h["lr"], "weight_decay": h["weight_decay"] if cfg.weight_decay else 0.0}
    if cfg.algorithm == "sgd":
        kw.update(momentum=h["momentum"] if cfg.momentum else 0.0, dampening=h["dampening"], nesterov=cfg.nesterov)
    else:
        # capturable on the GPU: the step counts and bias corrections stay on the device, so the step
        # can be captured in a CUDA graph and timed as the kernels alone, like every candidate (the
        # fused kernel is the same; the for-each path computes its bias corrections with _foreach ops)
        kw.update(betas=(h["beta1"], h["beta2"]), eps=h["eps"], amsgrad=cfg.amsgrad,
                  capturable=getattr(c.device, "type", "") == "cuda")
    kw[impl] = True
    try:
        opt = getattr(torch.optim, _TORCH_CLASS[cfg.algorithm])(params, **kw)
    except (RuntimeError, TypeError, ValueError) as e:  # fused where this torch has none
        raise NotSupported(f"torch.optim.{_TORCH_CLASS[cfg.algorithm]}({impl}=True): {e}") from e
    opt.step()  # creates the state as PyTorch does (step tensors, zeroed buffers)
    arena.uniform_(-1, 1)
    for state in opt.state.values():
        for name, t in state.items():
            if name == "momentum_buffer" or name == "exp_avg":
                t.uniform_(-0.1, 0.1)
            elif name in ("exp_avg_sq", "max_exp_avg_sq"):
                t.uniform_(0.25, 1.0)  # second moments of gradients of order 1
    return opt, arena


def _candidate(c: Ctx, impl: str) -> Candidate:
    cfg = c.cfg
    opt, arena = _torch_optimizer(c, impl)
    cls = _TORCH_CLASS[cfg.algorithm]
    if impl == "fused":
        call = f"torch:aten::_fused_{cfg.algorithm}_"
    else:
        call = f"torch:aten::_foreach_{'add_' if cfg.algorithm == 'sgd' else 'addcdiv_'}"

    def run():
        opt.step()
        return arena
    return Candidate(call, f"torch.optim.{cls}({impl}=True)", run, cfg.arena_elements,
                     note="optimizer.step() over the parameters as views of one arena",
                     details={"parameters": cfg.parameter_count, "tensors": len(cfg.parameters)})


def _optimizer(c: Ctx) -> Candidate:
    """PyTorch's fused step (``_fused_sgd_``, ``_fused_adam_``, ``_fused_adamw_``: one multi-tensor
    kernel) and its for-each step (``_foreach_*`` multi-tensor kernels, one per term) as a variant
    (:attr:`Candidate.variants`); the for-each one alone when this torch has no fused kernel."""
    foreach = _candidate(c, "foreach")
    try:
        fused = _candidate(c, "fused")
    except NotSupported:
        return foreach
    fused.variants.append(foreach)
    return fused


#: the ATen ops of the step in a PyTorch profile: the fused kernels and every for-each op the
#: multi-tensor paths of torch/optim/sgd.py and adam.py call (the step's bias corrections and step
#: counters are _foreach_add_/_foreach_pow/_foreach_sub ops too)
ATEN_OPS = ("aten::_fused_sgd_", "aten::_fused_adam_", "aten::_fused_adamw_", "aten::_foreach_add_",
            "aten::_foreach_add", "aten::_foreach_mul_", "aten::_foreach_mul", "aten::_foreach_lerp_",
            "aten::_foreach_addcmul_", "aten::_foreach_addcdiv_", "aten::_foreach_sqrt", "aten::_foreach_sqrt_",
            "aten::_foreach_div_", "aten::_foreach_maximum_", "aten::_foreach_pow", "aten::_foreach_sub",
            "aten::_foreach_neg", "aten::_foreach_neg_", "aten::_foreach_reciprocal_", "aten::_foreach_copy_")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`); the example: the step of resnet50's
#: first convolution, its bias and the classifier (a real model's tensors, a size a test can run)
KIND = Kind(
    example=OptimizerConfig.from_parameters([(64, 3, 7, 7), (64,), (64,), (1000, 2048), (1000,)], "adamw"),
    name="Optimizer", config=OptimizerConfig, template="optimizer.cpp.j2", case=_optimizer_case,
    min_bytes=optimizer_bytes, torch=_optimizer, onnx={}, typed_ops=(), fused_from=(),
    aten={"Optimizer": ATEN_OPS}, nhwc=False, image=False, phase="optimizer")
