"""GemmActBackward layers: a gradient GEMM of a training step with cuBLASLt's backward epilogue fused,
``D = (op(A) @ op(B)) * act'(aux)`` (DRELU / DGELU), with the bias gradient (DRELU_BGRAD / DGELU_BGRAD),
or the GEMM with a bias gradient of one operand (BGRADA / BGRADB); the backward pass of a GemmAct layer.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`); and the backward of
GemmAct (:func:`gemm_act_backward`, :func:`fused_consumer_dgrad`).

Where cuBLASLt puts the activation's derivative (cublasLt.h, ``cublasLtEpilogue_t`` and
``CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER``): DRELU / DGELU "apply the ReLU / GELU gradient to the
matmul output", with the forward's ReLU bit-mask or GELU input (saved by RELU_AUX / GELU_AUX_BIAS) as
the aux input. The gradient of ``Z = act(X W^T + b)`` w.r.t. its pre-activation is ``dZ * act'(pre)``,
and ``dZ`` is the *output* of the GEMM that computes the data gradient of the layer consuming Z
(``dZ = dY_next @ W_next``). So the derivative of a layer's activation is fused into its consumer's
data-gradient GEMM, and the ``_BGRAD`` forms also give that layer's bias gradient (D summed over its
rows); the layer's own data gradient ``dX = dPre @ W`` and weight gradient ``dW = dPre^T X`` are plain
GEMMs of dPre. This is how TransformerEngine's and apex's fused dense MLPs run the backward of
Linear -> GELU -> Linear.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, OPTIONAL, numel
from benanza.kinds.cpp import CppValue, cpp_num
from benanza.kinds.framework import Candidate, Ctx, NotSupported
from benanza.kinds.gemm import GemmCase, GemmConfig, b_is_weight, bias_gradient, gemm_case, gemm_gradients
from benanza.kinds.unary import UNARY_OPS


#: cuBLASLt's backward epilogues (cublasLtEpilogue_t, lower case) -> LtSpec::backward's code (lt.hpp)
EPILOGUES = {"drelu": 1, "drelu_bgrad": 2, "dgelu": 3, "dgelu_bgrad": 4, "bgrada": 5, "bgradb": 6}


@dataclass(frozen=True)
class GemmActBackwardConfig(LayerConfig):
    """One gradient GEMM with a cuBLASLt backward epilogue: cublasLtMatmul with
    ``CUBLASLT_EPILOGUE_<EPILOGUE>``, every config the heuristic returns and the pre-screened
    cublasLtMatmulAlgoGetIds configs timed (lt.cpp, as the forward GEMMs).

    gemm: the product ``D = op(A) @ op(B)`` (its m, n, k, batch_count, trans_a, trans_b; bias "none");
    epilogue: a key of :data:`EPILOGUES`, cuBLASLt's names (in ONNX's row-major view cuBLASLt's A is
    ``op(B)`` and its column-major D is Y, lt.cpp):

    - ``drelu`` / ``dgelu``: ``D = (op(A) @ op(B)) * act'(aux)``, aux the forward's ReLU bit-mask (1 bit
      per element of D) or GELU input (D's shape and type);
    - ``drelu_bgrad`` / ``dgelu_bgrad``: the same, and the bias gradient ``sum over D's m rows`` (length n);
    - ``bgrada``: D plus ``op(B)`` summed over k (length n); ``bgradb``: D plus ``op(A)`` summed over k
      (length m): the bias gradient of a weight-gradient GEMM whose operand is dY.

    gelu_erf: the layer's GELU is the erf form (ONNX Gelu approximate='none'); cuBLASLt's DGELU is the
    tanh form's derivative and stands in for it (same work; the measurement's note says so).
    FLOPs: the GEMM's 2*batch_count*m*n*k, plus per element of D 1 (drelu: a select) or the GELU's
    :data:`benanza.kinds.unary.UNARY_OPS` count + 1 (its derivative and the product with the
    incoming gradient), plus 1 per element summed for a bias gradient.
    Raises ValueError for an unknown epilogue, a GEMM with a bias, or gelu_erf without a DGELU.
    """

    kind: ClassVar[str] = "GemmActBackward"
    tensor_cores: ClassVar[bool] = True
    gemm: GemmConfig
    epilogue: str
    gelu_erf: bool = field(default=False, metadata=OPTIONAL)

    def __post_init__(self):
        if self.epilogue not in EPILOGUES:
            raise ValueError(f"backward epilogue must be one of {', '.join(EPILOGUES)}, not {self.epilogue!r}")
        if self.gemm.bias != "none":
            raise ValueError("a gradient GEMM has no bias term (its gemm's bias must be 'none')")
        if self.gelu_erf and not self.epilogue.startswith("dgelu"):
            raise ValueError("gelu_erf applies to the DGELU epilogues only")

    @property
    def batch_count(self) -> int:
        """The GEMM's number of products (:attr:`benanza.kinds.gemm.GemmConfig.batch_count`)."""
        return self.gemm.batch_count

    @property
    def activation(self) -> str:
        """"relu", "gelu" (erf), "gelu_tanh", or "" (a bias gradient alone)."""
        if self.epilogue.startswith("drelu"):
            return "relu"
        if self.epilogue.startswith("dgelu"):
            return "gelu" if self.gelu_erf else "gelu_tanh"
        return ""

    def bias_grad_length(self) -> int:
        """Elements of the bias gradient per product: n (``_bgrad``, ``bgrada``), m (``bgradb``), 0 (none)."""
        if self.epilogue == "bgradb":
            return self.gemm.m
        return self.gemm.n if self.epilogue.endswith("bgrad") or self.epilogue == "bgrada" else 0

    def input_shapes(self):
        shapes = self.gemm.input_shapes()
        if self.activation:  # the forward's aux, of D's shape (a bit-mask for ReLU)
            shapes = shapes + [self.gemm.output_shape()]
        return shapes

    def output_shape(self):
        return self.gemm.output_shape()

    def flops(self):
        g = self.gemm
        d = g.batch_count * g.m * g.n
        act = {"relu": 1, "": 0}.get(self.activation)
        if act is None:
            act = UNARY_OPS[self.activation][1] + 1
        summed = {"bgrada": g.batch_count * g.n * g.k, "bgradb": g.batch_count * g.m * g.k}.get(
            self.epilogue, d if self.bias_grad_length() else 0)
        return 2 * d * g.k + act * d + summed

    def describe(self):
        return self.gemm.describe().replace("Gemm(", "GemmActBackward(", 1)[:-1] + f" {self.epilogue.upper()})"


@dataclass(frozen=True)
class GemmActBackwardCase(GemmCase):
    """One row of ``templates/gemm_act_backward.cpp.j2``'s case table: the fields of its C++
    ``GemmActBackwardCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the
    order against the template)."""

    epilogue: CppValue
    erf_stand_in: CppValue


def _case(cfg: GemmActBackwardConfig, job: Job) -> GemmActBackwardCase:
    return GemmActBackwardCase(**vars(gemm_case(cfg.gemm, job)), epilogue=EPILOGUES[cfg.epilogue],
                               erf_stand_in=cpp_num(cfg.gelu_erf))


def _min_bytes(cfg: GemmActBackwardConfig, ib: int, ob: int) -> int:
    """A and B read once, the aux read once (ReLU: cuBLASLt's bit-mask, one bit per element of D
    rounded up to bytes; GELU: D's elements at ``ib``), D written once, the bias gradient written once
    (bytes)."""
    g = cfg.gemm
    a, b = g.input_shapes()
    d = numel(g.output_shape())
    aux = {"relu": (d + 7) // 8, "": 0}.get(cfg.activation, ib * d)
    return ib * (numel(a) + numel(b)) + aux + ob * (d + g.batch_count * cfg.bias_grad_length())


def _torch(c: Ctx) -> Candidate:
    """As PyTorch's autograd runs the same work: the gradient GEMM (``aten::mm``, ``aten::bmm`` for a
    batch) on the operands' layouts (a transposed operand is a transposed view, as ``grad.t().mm(x)``),
    then ReluBackward0's ``aten::threshold_backward(grad, result, 0)`` / GeluBackward0's
    ``aten::gelu_backward(grad, self, approximate)`` on its output, and the bias gradient
    ``aten::sum`` (AddmmBackward0's ``sum_to`` of the bias): of D over its rows, or of the operand
    cuBLASLt's BGRADA/BGRADB reduces."""
    cfg, torch = c.cfg, c.torch
    g = cfg.gemm
    a_shape, b_shape = g.input_shapes()
    a, b = c.randn(a_shape), c.randn(b_shape)
    a_eff = a.transpose(-1, -2) if g.trans_a else a
    b_eff = b.transpose(-1, -2) if g.trans_b else b
    mm = (lambda: torch.bmm(a_eff, b_eff)) if g.batch_count > 1 else (lambda: torch.mm(a_eff, b_eff))
    name = "bmm" if g.batch_count > 1 else "mm"
    act = cfg.activation
    if act == "relu":
        saved = c.randn(g.output_shape())  # the relu's output, which ReluBackward0 saves
        post, name = (lambda d: torch.ops.aten.threshold_backward(d, saved, 0)), name + "+threshold_backward"
    elif act:
        saved = c.randn(g.output_shape())  # the gelu's input, which GeluBackward0 saves
        approx = "none" if act == "gelu" else "tanh"
        post, name = (lambda d: torch.ops.aten.gelu_backward(d, saved, approximate=approx)), name + "+gelu_backward"
    else:
        post = None
    rows = tuple(range(len(g.output_shape()) - 1))  # D summed over its m rows (and the batch)
    if cfg.epilogue in ("bgrada", "bgradb"):
        # the operand cuBLASLt reduces, summed over k: op(B) (k x n) over its rows, op(A) (m x k) over its columns
        src, dims = (b_eff, (-2,)) if cfg.epilogue == "bgrada" else (a_eff, (-1,))
        if g.batch_count > 1:
            raise NotSupported("a batched BGRADA/BGRADB has a bias gradient per product; PyTorch sums it "
                               "over the batch")

        def fn():
            d = mm()
            src.sum(dims)
            return d
        name += "+sum"
    elif cfg.bias_grad_length():
        def fn():
            d = post(mm())
            d.sum(rows)
            return d
        name += "+sum"
    else:
        def fn():
            return post(mm())
    return Candidate(f"torch:aten::{name}", "default", fn, numel(g.output_shape()))


def _act_epilogue(activation: str, bgrad: bool) -> tuple[str, bool]:
    """(epilogue, gelu_erf) of a GemmAct activation's derivative."""
    base = "drelu" if activation == "relu" else "dgelu"
    return base + ("_bgrad" if bgrad else ""), activation == "gelu"


def _bias_epilogue(gemm: GemmConfig) -> str:
    """The epilogue of the weight-gradient GEMM (:func:`benanza.kinds.gemm.gemm_gradients`' dB) that
    also gives the bias gradient, dY summed over the m rows: dY is that GEMM's first operand when
    trans_b (``dB = dY^T op(A)``: cuBLASLt's B, so BGRADB, length n) and its second otherwise
    (``dB = op(A)^T dY``: cuBLASLt's A, so BGRADA, length n)."""
    return "bgradb" if gemm.trans_b else "bgrada"


def gemm_act_backward(cfg) -> tuple:
    """The backward calls of a GemmAct layer ``Z = act(op(A) @ op(B) + bias)`` (``cfg``: a
    :class:`benanza.kinds.gemm_act.GemmActConfig`, whose module imports this one; ``Kind.backward``),
    from the gradient dZ of its output (:func:`benanza.kinds.gemm.gemm_gradients` for the shapes):

    1. ``backward_data``: the data-gradient GEMM of A with the activation's derivative fused, a
       GemmActBackwardConfig with DRELU / DGELU. cuBLASLt fuses the derivative into the GEMM whose
       *output* is the activation's gradient (module docstring), the data-gradient GEMM of the layer
       that consumes Z, which this config cannot see (its width is not in the config). Charged here,
       a layer's own data-gradient GEMM carries the derivative: over a chain of layers it is the same
       GEMMs with one epilogue each, moved one layer down, as cuDNN's fused dgrad + dReLU carries the
       ReLU before a convolution. The exact placement, for a stage that sees the graph, is
       :func:`fused_consumer_dgrad`.
    2. the gradient of B: ``backward_weight`` when B is the weight (:func:`benanza.kinds.gemm.b_is_weight`),
       with a bias vector ("c") its gradient fused as BGRADB / BGRADA (:func:`_bias_epilogue`); a batch
       of products (B an activation) is a plain GEMM in ``backward_data``, and its bias gradient a
       ReduceSum of dY over rows and batch (``backward_weight``, :func:`benanza.kinds.gemm.bias_gradient`).
    """
    g = cfg.gemm
    da, db = gemm_gradients(g)
    epi, erf = _act_epilogue(cfg.activation, False)
    calls = [("backward_data", GemmActBackwardConfig(gemm=da, epilogue=epi, gelu_erf=erf))]
    if b_is_weight(g):
        wg = GemmActBackwardConfig(gemm=db, epilogue=_bias_epilogue(g)) if g.bias == "c" else db
        calls.append(("backward_weight", wg))
    else:
        calls.append(("backward_data", db))
        bias = bias_gradient(g)
        if bias is not None:
            calls.append(("backward_weight", bias))
    return tuple(calls)


def fused_consumer_dgrad(producer, consumer: GemmConfig) -> GemmActBackwardConfig:
    """The exact fused form when the output Z of a GemmAct ``producer`` (a GemmActConfig) is the A
    operand of ``consumer`` (a Gemm / MatMul, or the GEMM of the next GemmAct): the consumer's data-gradient GEMM of A
    (``dZ = dY @ op(B)^T``) with the producer's DRELU_BGRAD / DGELU_BGRAD, which writes the producer's
    pre-activation gradient and its bias gradient (cublasLt.h, CUBLASLT_EPILOGUE_DRELU_BGRAD). With
    it, the producer's weight gradient is a plain GEMM. Raises ValueError when the consumer's A is not
    of the producer's output shape, or A is transposed (the epilogue's D is then Z transposed)."""
    da, _ = gemm_gradients(consumer)
    a_shape = consumer.input_shapes()[0]
    if consumer.trans_a or tuple(a_shape) != tuple(producer.output_shape()):
        raise ValueError(f"the consumer's A {a_shape} (trans_a {consumer.trans_a}) is not the producer's output "
                         f"{producer.output_shape()}")
    epi, erf = _act_epilogue(producer.activation, producer.gemm.bias == "c" and producer.gemm.batch_count == 1)
    return GemmActBackwardConfig(gemm=da, epilogue=epi, gelu_erf=erf)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GemmActBackwardConfig(gemm=GemmConfig(m=32, n=4096, k=4096, trans_a=False, trans_b=False),
                                  epilogue="drelu_bgrad"),
    name="GemmActBackward", config=GemmActBackwardConfig, template="gemm_act_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, onnx={},
    typed_ops=(), fused_from=("Gemm", "MatMul", "Relu", "Gelu"),
    # the autograd kernels of the activations' derivatives (the gradient GEMMs' aten::mm / aten::bmm
    # are the Gemm kind's already)
    aten={"Relu": ("aten::threshold_backward",), "Gelu": ("aten::gelu_backward",)},
    nhwc=False, image=False)
