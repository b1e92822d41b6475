"""Typed layer configurations: the unit the generator, the database and the analyzer share.

A *layer config* holds every parameter that changes the library call for one ONNX node: the kind of
call, the tensor shapes (batch included) and the call's attributes. Two nodes with equal configs do
the same work, so they are benchmarked once; the canonical :pyattr:`LayerConfig.key` identifies a
config across runs and machines (it is a hash of a canonical JSON of the kind and parameters; it
contains no node or tensor names). The data type is *not* part of a config: a config is measured
once per precision (:data:`PRECISIONS`).

Shapes are tuples of ints in ONNX order (NCHW for images). Sizes are elements unless a name says
bytes. FLOPs count a multiply-add as two floating-point operations.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import ClassVar

Shape = tuple[int, ...]

#: Precisions a layer can be measured in: storage data type and the math the library may use.
#: ``fp32``: float32 data, pure FMA math (no Tensor Cores); ``tf32``: float32 data, TF32 Tensor
#: Core math allowed; ``fp16`` / ``bf16``: float16 / bfloat16 data, Tensor Core math, float32
#: accumulation; ``fp8``: FP8 (E4M3) GEMM inputs on Hopper Tensor Cores (cuBLASLt, float32
#: accumulation, float16 output), the other layers in fp16 (see :func:`precisions_for`).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")

#: storage data type of each precision (fp8: the data type of the GEMM inputs)
PRECISION_DTYPE = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16",
                   "fp8": "float8_e4m3"}

#: layer kinds with an FP8 implementation (cuBLASLt FP8 matmul); every other kind serves an fp8
#: analysis with its fp16 measurements
FP8_KINDS = ("Gemm",)

#: precision an fp8 analysis falls back to for layers without an FP8 implementation
FP8_FALLBACK = "fp16"

#: math modes a measurement may carry, per precision, that the analyzer accepts for a lower bound.
#: ``fma``: CUDA-core FMA only; ``tf32``: TF32 Tensor Cores permitted; ``tensor_op``: FP16 Tensor
#: Cores; ``none``: the call has no math mode (pooling, activations, copies...).
ACCEPTED_MATH = {
    "fp32": ("fma", "none"),
    "tf32": ("fma", "tf32", "none"),
    "fp16": ("tensor_op", "fma", "none"),
    "bf16": ("tensor_op", "fma", "none"),
    # fp8: FP8 GEMMs (``fp8``; ``fp8_fast_accum``: cuBLASLt's FP8 fast accumulation, as
    # TransformerEngine's forward pass uses it) and, as fp16 does, everything else
    "fp8": ("fp8", "fp8_fast_accum", "tensor_op", "fma", "none"),
}

#: storage data types whose measurements serve an analysis in each precision: its own, and for
#: fp8 also float16 (layers without an FP8 implementation, and GEMMs whose shape FP8 does not
#: support or that run faster in fp16)
ACCEPTED_DTYPES = {p: (d,) for p, d in PRECISION_DTYPE.items()}
ACCEPTED_DTYPES["fp8"] = (PRECISION_DTYPE["fp8"], PRECISION_DTYPE[FP8_FALLBACK])

#: layer kinds that are convolutions (cuDNN convolution calls), which PyTorch's fp32 default runs with
#: TF32 (``torch.backends.cudnn.allow_tf32``) while its matmuls run in FP32
CONV_KINDS = ("Conv", "ConvBiasAct", "ConvBnAct")
#: layer kinds whose math mode ``torch.backends.cudnn.allow_tf32`` sets in PyTorch: its cuDNN
#: convolutions and its cuDNN RNNs (ATen's cudnn/RNN.cpp picks TF32 math for float RNNs under that
#: flag; seen on an H200: PyTorch 2.11's fp32 LSTM runs ``sm90_xmma_gemm_f32f32_tf32f32`` kernels). An
#: ``fp32`` analysis with ``conv_precision`` ``tf32`` (``--conv-tf32``, PyTorch's fp32 default) runs these in tf32
CUDNN_TF32_KINDS = CONV_KINDS + ("RNN",)

#: bytes per element of each storage data type
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3": 1}


#: ``dataclasses.field(metadata=OPTIONAL)`` marks a config field added after configs were first stored:
#: it is left out of the canonical parameters (and so of the key) while it holds its default, so the
#: keys of every config that does not use it stay what they were (databases keep matching).
OPTIONAL = {"omit_default": True}


def _omitted(f: dataclasses.Field, value) -> bool:
    return bool(f.metadata.get("omit_default")) and f.default is not dataclasses.MISSING and value == f.default


def _canonical(value):
    """JSON-ready canonical form: tuples become lists, floats keep their repr, dataclasses dicts
    (fields marked :data:`OPTIONAL` left out while they hold their default)."""
    if dataclasses.is_dataclass(value):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not _omitted(f, getattr(value, f.name))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value


def numel(shape: Shape) -> int:
    """Number of elements of a tensor of ``shape``."""
    return math.prod(shape) if shape else 1


@dataclass(frozen=True)
class LayerConfig:
    """Base class of layer configs (frozen dataclasses; fields are the call's parameters)."""

    kind: ClassVar[str] = "Layer"
    #: True when TF32/FP16 Tensor Core math changes the library call (convolutions, GEMMs)
    tensor_cores: ClassVar[bool] = False

    def params(self) -> dict:
        """Canonical parameters (JSON-ready, deterministic)."""
        return _canonical(self)

    @property
    def key(self) -> str:
        """Stable identifier: ``<kind>-<16 hex digits of sha256(canonical JSON)>``."""
        blob = json.dumps({"kind": self.kind, "params": self.params()}, sort_keys=True,
                          separators=(",", ":"))
        return f"{self.kind.lower()}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"

    @property
    def batch(self) -> int:
        """Batch size (dim 0 of the first input) of this config."""
        return self.input_shapes()[0][0] if self.input_shapes() and self.input_shapes()[0] else 1

    def input_shapes(self) -> list[Shape]:
        raise NotImplementedError

    def output_shape(self) -> Shape:
        raise NotImplementedError

    def flops(self) -> int:
        """Floating-point operations of one forward call (multiply-add = 2)."""
        return numel(self.output_shape())

    def describe(self) -> str:
        """Short human-readable description: kind and shapes."""
        ins = ",".join("x".join(map(str, s)) for s in self.input_shapes())
        return f"{self.kind}({ins} -> {'x'.join(map(str, self.output_shape()))})"


def _conv_out(size: int, k: int, pad_begin: int, pad_end: int, stride: int, dilation: int) -> int:
    return (size + pad_begin + pad_end - dilation * (k - 1) - 1) // stride + 1


@dataclass(frozen=True)
class ConvConfig(LayerConfig):
    """ONNX Conv: ``y = conv(x, w) (+ bias)``; cudnnConvolutionForward (+ cudnnAddTensor for bias).

    x: (N, C, *spatial); w: (K, C/group, *kernel); pads: (begin..., end...) per spatial dim.
    FLOPs: 2 * N * K * prod(out spatial) * C/group * prod(kernel) (+ N*K*prod(out) for bias).
    """

    kind: ClassVar[str] = "Conv"
    tensor_cores: ClassVar[bool] = True
    x: Shape
    w: Shape
    pads: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    group: int
    bias: bool

    def input_shapes(self):
        return [self.x, self.w]

    def output_shape(self):
        nsp = len(self.x) - 2
        spatial = tuple(
            _conv_out(self.x[2 + i], self.w[2 + i], self.pads[i], self.pads[nsp + i],
                      self.strides[i], self.dilations[i]) for i in range(nsp))
        return (self.x[0], self.w[0]) + spatial

    @property
    def symmetric_pads(self) -> bool:
        nsp = len(self.x) - 2
        return tuple(self.pads[:nsp]) == tuple(self.pads[nsp:])

    def flops(self):
        y = self.output_shape()
        macs = numel(y) * self.w[1] * numel(self.w[2:])
        return 2 * macs + (numel(y) if self.bias else 0)

    def describe(self):
        nsp = len(self.x) - 2
        k = "x".join(map(str, self.w[2:]))
        parts = [f"{'x'.join(map(str, self.x))} k{self.w[0]} {k}",
                 f"s{','.join(map(str, self.strides))}"]
        if any(self.pads):
            parts.append(f"p{','.join(map(str, self.pads[:nsp] if self.symmetric_pads else self.pads))}")
        if any(d != 1 for d in self.dilations):
            parts.append(f"d{','.join(map(str, self.dilations))}")
        if self.group != 1:
            parts.append(f"g{self.group}")
        if self.bias:
            parts.append("bias")
        return f"Conv({' '.join(parts)})"


@dataclass(frozen=True)
class ConvBiasActConfig(LayerConfig):
    """Fused Conv -> bias -> activation: cudnnConvolutionBiasActivationForward.

    Covers the two ONNX layers of a fusion candidate (a Conv with bias and the Relu after it), so its
    measurements are only compared with the sum of those two layers, never with the Conv alone.
    """

    kind: ClassVar[str] = "ConvBiasAct"
    tensor_cores: ClassVar[bool] = True
    conv: ConvConfig
    activation: str  # "relu"

    def input_shapes(self):
        return self.conv.input_shapes()

    def output_shape(self):
        return self.conv.output_shape()

    def flops(self):
        return self.conv.flops() + numel(self.output_shape())

    def describe(self):
        return self.conv.describe().replace("Conv(", "ConvBiasAct(", 1) + f"+{self.activation}"


@dataclass(frozen=True)
class ConvBnActConfig(LayerConfig):
    """Fused Conv -> BatchNormalization (inference) [-> Relu]: one cuDNN graph, conv_fprop ->
    pointwise MUL (the per-channel scale gamma / sqrt(var + eps)) -> pointwise ADD (the shift, the
    conv's own bias folded in) [-> RELU_FWD] (cuDNN developer guide, "Graph API": the ConvBNfprop /
    conv + scale + bias + activation fusion patterns), every engine config of the graph API.

    Covers the two or three ONNX layers of a fusion candidate (Conv, BatchNormalization, Relu), so
    its measurements are only compared with the sum of those layers. activation: "relu" or "none".
    FLOPs: the convolution's + 2 per output element (scale, shift) + 1 for the Relu.
    """

    kind: ClassVar[str] = "ConvBnAct"
    tensor_cores: ClassVar[bool] = True
    conv: ConvConfig
    activation: str  # "relu" or "none"

    def input_shapes(self):
        return self.conv.input_shapes()

    def output_shape(self):
        return self.conv.output_shape()

    def flops(self):
        n = numel(self.output_shape())
        return self.conv.flops() + 2 * n + (n if self.activation == "relu" else 0)

    def describe(self):
        act = "" if self.activation == "none" else f"+{self.activation}"
        return self.conv.describe().replace("Conv(", "ConvBnAct(", 1) + "+bn" + act


#: activation modes, their cuDNN call and how the ONNX attributes map
ACTIVATION_MODES = ("relu", "sigmoid", "tanh", "clipped_relu", "leaky_relu", "hard_sigmoid", "elu", "swish")


@dataclass(frozen=True)
class ActivationConfig(LayerConfig):
    """Elementwise activation (Relu, Sigmoid, Tanh, Clip(0, max), LeakyRelu, HardSigmoid, Elu; and
    swish, x * sigmoid(x), PyTorch's SiLU: the fusion candidate of an exported Sigmoid -> Mul).

    cudnnActivationForward for relu/sigmoid/tanh/clipped_relu/elu/swish (beta 1); LeakyRelu is cudnnOpTensor
    MAX(x, alpha*x) (exact for 0 < alpha < 1); HardSigmoid (no cuDNN call) is timed as
    cudnnActivationForward(CLIPPED_RELU) on the same tensor, a proxy with the same memory traffic,
    and its measurements say so.
    """

    kind: ClassVar[str] = "Activation"
    shape: Shape
    mode: str
    alpha: float = 0.0  # clip max / leaky slope / hard-sigmoid alpha / elu alpha
    beta: float = 0.0  # hard-sigmoid beta

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def describe(self):
        return f"Activation({self.mode} {'x'.join(map(str, self.shape))})"


@dataclass(frozen=True)
class BatchNormConfig(LayerConfig):
    """BatchNormalization in inference: cudnnBatchNormalizationForwardInference (spatial mode).

    FLOPs: 2 per element (scale and shift after folding mean/var, as cuDNN computes it).
    """

    kind: ClassVar[str] = "BatchNorm"
    shape: Shape
    epsilon: float

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return 2 * numel(self.shape)


@dataclass(frozen=True)
class PoolingConfig(LayerConfig):
    """MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool: cudnnPoolingForward.

    x: (N, C, *spatial); y: given (it carries ceil_mode). pads: (begin..., end...).
    mode: "max", "avg_include_pad" or "avg_exclude_pad".
    """

    kind: ClassVar[str] = "Pooling"
    x: Shape
    y: Shape
    mode: str
    kernel: tuple[int, ...]
    pads: tuple[int, ...]
    strides: tuple[int, ...]

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.y

    def flops(self):
        return numel(self.y) * numel(self.kernel)

    def describe(self):
        return (f"Pooling({self.mode} {'x'.join(map(str, self.x))} k{'x'.join(map(str, self.kernel))} "
                f"s{','.join(map(str, self.strides))} -> {'x'.join(map(str, self.y))})")


@dataclass(frozen=True)
class SoftmaxConfig(LayerConfig):
    """Softmax / LogSoftmax over one axis: cudnnSoftmaxForward (ACCURATE, CHANNEL mode).

    shape: the tensor viewed as (outer, axis, inner): the reduction runs over dim 1.
    """

    kind: ClassVar[str] = "Softmax"
    shape: Shape
    log: bool = False

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return 5 * numel(self.shape)


#: element types a layer may store besides the precision's float type (ONNX TensorProto names,
#: lower case) and their size in bytes; bool is ONNX's one byte per element
STORED_TYPES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                "uint64": 8}

#: binary elementwise ops: their ONNX operators (ONNX operator spec), FLOPs per output element on
#: float data (0 on integer and bool data, which have no floating-point operations; a library
#: function such as pow or fmod counts as one, as in :data:`UNARY_OPS`), and whether the output is
#: bool (1 byte per element)
ELEMENTWISE_OPS = {
    "add": ("Add, Sum of 2 inputs", 1, False),
    "sub": ("Sub", 1, False),
    "mul": ("Mul", 1, False),
    "div": ("Div", 1, False),
    "max": ("Max of 2 inputs", 1, False),
    "min": ("Min of 2 inputs", 1, False),
    "mean": ("Mean of 2 inputs: (a + b) / 2", 2, False),
    "pow": ("Pow with a tensor exponent", 1, False),
    "mod": ("Mod fmod=0 (integers): the remainder with the sign of the divisor", 1, False),
    "fmod": ("Mod fmod=1: the remainder with the sign of the dividend (C fmod)", 1, False),
    "prelu": ("PRelu: x < 0 ? slope * x : x, slope broadcast to x", 2, False),
    "equal": ("Equal", 1, True),
    "less": ("Less", 1, True),
    "less_equal": ("LessOrEqual", 1, True),
    "greater": ("Greater", 1, True),
    "greater_equal": ("GreaterOrEqual", 1, True),
    "and": ("And (bool)", 0, True),
    "or": ("Or (bool)", 0, True),
    "xor": ("Xor (bool)", 0, True),
    "bitwise_and": ("BitwiseAnd (integers)", 0, False),
    "bitwise_or": ("BitwiseOr (integers)", 0, False),
    "bitwise_xor": ("BitwiseXor (integers)", 0, False),
    "shift_left": ("BitShift direction=LEFT (unsigned integers)", 0, False),
    "shift_right": ("BitShift direction=RIGHT (unsigned integers)", 0, False),
}


@dataclass(frozen=True)
class ElementwiseConfig(LayerConfig):
    """Binary elementwise op with ONNX (numpy) broadcasting (see :data:`ELEMENTWISE_OPS`).

    a, b: input shapes padded to the output rank (either may broadcast); dtype: the element type
    of a and b when they are not float ("" : the precision's float type; else a key of
    :data:`STORED_TYPES`); the output is bool for comparisons and logical ops, else a's type.
    Timed: the harness's vectorized kernel (``benanza::binary_pointwise``, broadcasting both
    operands) always; cudnnOpTensor for add/sub/mul/div/max/min/mean on float data when one operand
    has the output's shape (Sub is ADD with alpha2 = -1, Mean ADD with both alphas 1/2, Div MUL by
    the reciprocal: same memory traffic, the measurement says so); and a one-node cuDNN pointwise
    graph for the ops cuDNN's pointwise modes have (DIV, POW, MOD, CMP_*, LOGICAL_AND/OR).
    FLOPs: output elements * the op's count (0 on integer or bool data).
    """

    kind: ClassVar[str] = "Elementwise"
    op: str
    a: Shape
    b: Shape
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def input_shapes(self):
        return [self.a, self.b]

    def output_shape(self):
        return tuple(max(x, y) for x, y in zip(self.a, self.b))

    @property
    def out_dtype(self) -> str:
        """The output's element type ("" : the precision's float type)."""
        return "bool" if ELEMENTWISE_OPS[self.op][2] else self.dtype

    def flops(self):
        return 0 if self.dtype else numel(self.output_shape()) * ELEMENTWISE_OPS[self.op][1]

    def describe(self):
        t = f" {self.dtype}" if self.dtype else ""
        return f"Elementwise({self.op}{t} {'x'.join(map(str, self.a))},{'x'.join(map(str, self.b))})"


@dataclass(frozen=True)
class GemmConfig(LayerConfig):
    """Gemm / MatMul: ``Y[b] = A[b] @ B[b] (+ C)``, row-major; cublasGemmEx (batched: strided).

    m, n, k: the product's sizes; batch: number of independent products (1 for Gemm);
    trans_a/trans_b: ONNX transA/transB; bias: Gemm's C input, "none", "c" (a length-n vector,
    C of shape (n,) or (1, n): the bias of a fully connected layer) or "c_full" (any other C that
    broadcasts to (m, n)). Timed as beta = 1 onto an output that holds C (cublasGemmEx and
    cublasLtMatmul) and, for "c", also as cuBLASLt's CUBLASLT_EPILOGUE_BIAS.
    FLOPs: 2*batch*m*n*k (+ batch*m*n for the bias).
    """

    kind: ClassVar[str] = "Gemm"
    tensor_cores: ClassVar[bool] = True
    m: int
    n: int
    k: int
    batch: int = 1
    trans_a: bool = False
    trans_b: bool = False
    bias: str = "none"

    def input_shapes(self):
        a = (self.k, self.m) if self.trans_a else (self.m, self.k)
        b = (self.n, self.k) if self.trans_b else (self.k, self.n)
        if self.batch > 1:
            return [(self.batch,) + a, (self.batch,) + b]
        return [a, b]

    def output_shape(self):
        return ((self.batch,) if self.batch > 1 else ()) + (self.m, self.n)

    def flops(self):
        return 2 * self.batch * self.m * self.n * self.k + (
            self.batch * self.m * self.n if self.bias != "none" else 0)

    def describe(self):
        t = ("T" if self.trans_a else "N") + ("T" if self.trans_b else "N")
        b = f"{self.batch}x" if self.batch > 1 else ""
        c = {"none": "", "c": " +C", "c_full": " +C(full)"}.get(self.bias, f" +{self.bias}")
        return f"Gemm({b}m{self.m} n{self.n} k{self.k} {t}{c})"


#: activations a GemmAct fusion candidate applies after the matmul (+ bias)
GEMM_ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


@dataclass(frozen=True)
class GemmActConfig(LayerConfig):
    """Fused Gemm/MatMul (+ bias) -> activation: ``Y = act(A @ B (+ C))``, the MLP block of a
    transformer (Linear -> GELU) or a fully connected layer -> Relu.

    gemm: the product (its ``bias`` is "c" when a Gemm's C or the per-output-feature bias Add after
    a MatMul is part of the candidate); activation: "relu", "gelu" (erf form: ONNX Gelu
    approximate='none', or the decomposed Div/Erf/Add/Mul/Mul) or "gelu_tanh".
    Timed as one cuDNN graph, matmul -> pointwise ADD (bias) -> RELU_FWD / GELU_FWD /
    GELU_APPROX_TANH_FWD, every engine config; and as cublasLtMatmul with the epilogue
    CUBLASLT_EPILOGUE_RELU_BIAS / GELU_BIAS (RELU / GELU without a bias; cuBLASLt's GELU is the
    tanh approximation, so for an erf GELU it is a same-work stand-in and says so).
    Covers the two or three ONNX layers of the candidate (or the GEMM, bias Add and the five of a
    decomposed GELU), so its measurements are only compared with their sum.
    FLOPs: the GEMM's (bias included) + per output element 1 (relu) or the GELU's count of
    :data:`UNARY_OPS`.
    """

    kind: ClassVar[str] = "GemmAct"
    tensor_cores: ClassVar[bool] = True
    gemm: GemmConfig
    activation: str  # a member of GEMM_ACTIVATIONS

    def input_shapes(self):
        return self.gemm.input_shapes()

    def output_shape(self):
        return self.gemm.output_shape()

    def flops(self):
        per = 1 if self.activation == "relu" else UNARY_OPS[self.activation][1]
        return self.gemm.flops() + per * numel(self.output_shape())

    def describe(self):
        return self.gemm.describe().replace("Gemm(", "GemmAct(", 1)[:-1] + f" +{self.activation})"


@dataclass(frozen=True)
class LRNConfig(LayerConfig):
    """LRN across channels: cudnnLRNCrossChannelForward (same formula as ONNX: alpha/size)."""

    kind: ClassVar[str] = "LRN"
    shape: Shape
    size: int
    alpha: float
    beta: float
    bias: float

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return numel(self.shape) * (2 * self.size + 3)


@dataclass(frozen=True)
class DropoutConfig(LayerConfig):
    """Dropout in training mode: cudnnDropoutForward. (In inference Dropout is an identity.)"""

    kind: ClassVar[str] = "Dropout"
    shape: Shape
    ratio: float

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape


REDUCE_OPS = ("mean", "sum", "max", "min")


@dataclass(frozen=True)
class ReduceConfig(LayerConfig):
    """ReduceMean/Sum/Max/Min: cudnnReduceTensor. y is x with the reduced axes set to 1."""

    kind: ClassVar[str] = "Reduce"
    op: str
    x: Shape
    y: Shape

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.y

    def flops(self):
        return numel(self.x)


@dataclass(frozen=True)
class Transfer:
    """One strided copy ``dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides]``.

    dims, strides and offsets are in elements; src_index says which input tensor is read.
    """

    dims: tuple[int, ...]
    src_strides: tuple[int, ...]
    dst_strides: tuple[int, ...]
    src_offset: int = 0
    dst_offset: int = 0
    src_index: int = 0


def _packed_strides(shape: Shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class CopyConfig(LayerConfig):
    """Layers that only move data: Concat, Transpose, Slice, Pad (constant), costed as the memory
    traffic they are: cudnnTransformTensor per strided transfer (plus cudaMemsetAsync of the output
    for Pad), not as zero.

    op: ONNX op; inputs: input shapes; y: output shape; attrs: op parameters as sorted pairs
    (Concat: axis; Transpose: perm; Slice: starts/ends/axes/steps normalised; Pad: pads).
    """

    kind: ClassVar[str] = "Copy"
    op: str
    inputs: tuple[Shape, ...]
    y: Shape
    attrs: tuple[tuple[str, tuple[int, ...]], ...]

    def input_shapes(self):
        return list(self.inputs)

    def output_shape(self):
        return self.y

    def flops(self):
        return 0

    def attr(self, name: str) -> tuple[int, ...]:
        return dict(self.attrs)[name]

    def is_identity(self) -> bool:
        """True when the op returns its one input unchanged: a Slice of every element (starts 0,
        steps 1, the input's shape), a Pad of zeros, a Transpose by the identity permutation, a
        Concat of one input. Such a layer moves no data in any implementation (zero-cost)."""
        if len(self.inputs) != 1 or tuple(self.inputs[0]) != tuple(self.y):
            return False
        if self.op == "Slice":
            return not any(self.attr("starts")) and all(s == 1 for s in self.attr("steps"))
        if self.op == "Pad":
            return not any(self.attr("pads"))
        if self.op == "Transpose":
            return tuple(self.attr("perm")) == tuple(range(len(self.y)))
        return self.op == "Concat"

    def fills_output(self) -> bool:
        """True when the output is first set to the pad value (Pad)."""
        return self.op == "Pad"

    def transfers(self) -> list[Transfer]:
        """The strided copies that implement the op (in elements)."""
        y_strides = _packed_strides(self.y)
        if self.op == "Concat":
            axis = self.attr("axis")[0]
            out, offset = [], 0
            for i, s in enumerate(self.inputs):
                out.append(Transfer(s, _packed_strides(s), y_strides, 0, offset * y_strides[axis], i))
                offset += s[axis]
            return out
        x = self.inputs[0]
        x_strides = _packed_strides(x)
        if self.op == "Transpose":
            perm = self.attr("perm")
            return [Transfer(self.y, tuple(x_strides[p] for p in perm), y_strides)]
        if self.op == "Slice":
            starts, steps = self.attr("starts"), self.attr("steps")
            off = sum(st * xs for st, xs in zip(starts, x_strides))
            return [Transfer(self.y, tuple(xs * sp for xs, sp in zip(x_strides, steps)), y_strides, off, 0)]
        if self.op == "Pad":
            pads = self.attr("pads")
            r = len(x)
            off = sum(pads[i] * y_strides[i] for i in range(r))
            return [Transfer(x, x_strides, y_strides, 0, off)]
        raise ValueError(f"CopyConfig: unknown op {self.op}")

    def describe(self):
        ins = ",".join("x".join(map(str, s)) for s in self.inputs)
        return f"Copy({self.op} {ins} -> {'x'.join(map(str, self.y))})"


#: recurrent cells cudnnRNNForward computes: gates per cell (LSTM: input, forget, cell, output;
#: GRU: reset, update, new)
RNN_GATES = {"lstm": 4, "gru": 3}
RNN_DIRECTIONS = ("forward", "reverse", "bidirectional")


@dataclass(frozen=True)
class RNNConfig(LayerConfig):
    """ONNX LSTM / GRU (one layer per node): cudnnRNNForward in inference mode (cuDNN 9 RNN API:
    cudnnSetRNNDescriptor_v8, RNN data descriptors, cudnnGetRNNTempSpaceSizes with
    CUDNN_FWD_MODE_INFERENCE), algorithms STANDARD, PERSIST_STATIC and PERSIST_STATIC_SMALL_H.

    cell: "lstm" or "gru"; seq_len, input_size, hidden_size, batch: the ONNX sizes (X is
    (seq_len, batch, input_size) for layout "seq_major", (batch, seq_len, input_size) for
    "batch_major"); num_layers: 1 (an ONNX node is one layer); direction: "forward", "reverse"
    (timed as forward: the same work on the reversed sequence) or "bidirectional"; bias: the ONNX
    B input (W and R biases: CUDNN_RNN_DOUBLE_BIAS); linear_before_reset: the GRU attribute (cuDNN
    computes the linear_before_reset=1 formula; 0 is timed with it, same FLOPs and traffic, and
    the measurement says so).

    Output Y: (seq_len, num_directions, batch, hidden_size) ("seq_major"; ONNX's layout 0) or
    (batch, seq_len, num_directions, hidden_size) ("batch_major", layout 1).
    FLOPs (the two GEMMs per gate; the elementwise cell updates are not counted):
    2 * seq_len * batch * gates * hidden_size * (input_size + hidden_size) per direction, gates = 4
    (LSTM) or 3 (GRU) (cuDNN developer guide, "Recurrent neural networks": each gate is
    W x_t + R h_{t-1}; ONNX operator docs, LSTM / GRU equations).
    """

    kind: ClassVar[str] = "RNN"
    tensor_cores: ClassVar[bool] = True
    cell: str
    seq_len: int
    input_size: int
    hidden_size: int
    batch: int = 1  # a field with a default, as GemmConfig's: it replaces the base class's property
    num_layers: int = 1
    direction: str = "forward"
    bias: bool = True
    layout: str = "seq_major"
    linear_before_reset: bool = False

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def gates(self) -> int:
        return RNN_GATES[self.cell]

    def input_shapes(self):
        if self.layout == "batch_major":
            return [(self.batch, self.seq_len, self.input_size)]
        return [(self.seq_len, self.batch, self.input_size)]

    def output_shape(self):
        if self.layout == "batch_major":
            return (self.batch, self.seq_len, self.num_directions, self.hidden_size)
        return (self.seq_len, self.num_directions, self.batch, self.hidden_size)

    def flops(self):
        per_dir = 2 * self.seq_len * self.batch * self.gates * self.hidden_size * (self.input_size + self.hidden_size)
        return self.num_layers * self.num_directions * per_dir

    def describe(self):
        d = {"forward": "", "reverse": " rev", "bidirectional": " bidir"}[self.direction]
        lbr = " lbr0" if self.cell == "gru" and not self.linear_before_reset else ""
        lay = " batch-major" if self.layout == "batch_major" else ""
        return (f"RNN({self.cell.upper()} seq{self.seq_len} b{self.batch} in{self.input_size} "
                f"h{self.hidden_size}{d}{'' if self.bias else ' nobias'}{lay}{lbr})")


# ------------------------------------------------------------------------ transformer layers (issue 4)

@dataclass(frozen=True)
class LayerNormConfig(LayerConfig):
    """ONNX LayerNormalization (opset 17; ONNX operator spec), inference:
    ``y = (x - mean) / sqrt(var + epsilon) * scale (+ bias)``, mean and (biased) variance over the
    dims from ``axis`` on. Also the fused form of the decomposed ReduceMean/Sub/Pow/ReduceMean/Add/
    Sqrt/Div/Mul/Add chain older exporters emit (a fusion candidate, see ``model._find_layernorms``).

    x: the input shape; axis >= 0; the call sees x as (rows, cols) = (prod(x[:axis]), prod(x[axis:])),
    scale and bias as (cols,) in float32 (as cuDNN's samples and mixed-precision frameworks keep
    them). bias: ONNX's optional B input is present (absent: timed with a zero bias); stats: the
    optional Mean/InvStdDev outputs are used (the call then also writes them, float32, (rows,)).
    Timed: the cuDNN graph API's layernorm (cudnn-frontend ``Graph::layernorm``, forward phase
    INFERENCE, or TRAINING when stats are needed; cuDNN developer guide, "Layernorm"), every engine
    config of heuristics modes A, B and the fallback list; and a benanza CUDA kernel (one block per
    row, float32 statistics) so a layer always has a valid measurement.
    FLOPs: 8 per element (mean 1, variance 3, normalise 2, scale and shift 2).
    """

    kind: ClassVar[str] = "LayerNorm"
    x: Shape
    axis: int
    epsilon: float
    bias: bool = True
    stats: bool = False

    @property
    def rows(self) -> int:
        return numel(self.x[:self.axis])

    @property
    def cols(self) -> int:
        return numel(self.x[self.axis:])

    def input_shapes(self):
        return [self.x, self.x[self.axis:]]

    def output_shape(self):
        return self.x

    def flops(self):
        return 8 * numel(self.x)

    def describe(self):
        return (f"LayerNorm({'x'.join(map(str, self.x))} axis {self.axis} eps {self.epsilon:g}"
                f"{'' if self.bias else ' no-bias'}{' +stats' if self.stats else ''})")


#: unary elementwise ops, their ONNX operators (ONNX operator spec) and FLOPs per element
#: (transcendental functions count as one operation)
UNARY_OPS = {
    "gelu": ("Gelu approximate='none' (opset 20): x/2 (1 + erf(x/sqrt 2))", 5),
    "gelu_tanh": ("Gelu approximate='tanh' (opset 20): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))", 9),
    "erf": ("Erf", 1),
    "exp": ("Exp", 1),
    "log": ("Log", 1),
    "sqrt": ("Sqrt", 1),
    "reciprocal": ("Reciprocal", 1),
    "neg": ("Neg", 1),
    "abs": ("Abs", 1),
    "pow": ("Pow with a constant scalar exponent", 1),
    "cast": ("Cast (CastLike) to the float type of the precision, to bool or to an integer type", 0),
    "acos": ("Acos", 1),
    "acosh": ("Acosh", 1),
    "asin": ("Asin", 1),
    "asinh": ("Asinh", 1),
    "atan": ("Atan", 1),
    "atanh": ("Atanh", 1),
    "ceil": ("Ceil", 1),
    "cos": ("Cos", 1),
    "cosh": ("Cosh", 1),
    "floor": ("Floor", 1),
    "hard_swish": ("HardSwish: x * max(0, min(1, x / 6 + 1/2))", 5),
    "is_inf": ("IsInf (alpha: detect_negative, beta: detect_positive, 0 or 1): bool output", 1),
    "is_nan": ("IsNaN: bool output", 1),
    "mish": ("Mish: x * tanh(log(1 + exp(x)))", 5),
    "not": ("Not: bool input and output", 0),
    "round": ("Round (half to even)", 1),
    "selu": ("Selu (alpha, gamma as beta): x > 0 ? gamma * x : gamma * (alpha * exp(x) - alpha)", 5),
    "sign": ("Sign", 1),
    "sin": ("Sin", 1),
    "sinh": ("Sinh", 1),
    "softplus": ("Softplus: log(exp(x) + 1)", 3),
    "softsign": ("Softsign: x / (1 + |x|)", 3),
    "tan": ("Tan", 1),
    "thresholded_relu": ("ThresholdedRelu (alpha): x > alpha ? x : 0", 1),
    "celu": ("Celu (alpha): max(0, x) + min(0, alpha * (exp(x / alpha) - 1))", 7),
    "shrink": ("Shrink (alpha: lambd, beta: bias): x < -lambd ? x + bias : x > lambd ? x - bias : 0", 3),
    "bitwise_not": ("BitwiseNot: integer input and output", 0),
    "clip": ("Clip (alpha: min, beta: max; an absent bound is -/+ FLT_MAX) other than Clip(0, max)", 2),
    "swish": ("Swish (alpha): x * sigmoid(alpha * x)", 5),
}

#: the largest finite float32: Clip's absent bound
FLT_MAX = 3.4028234663852886e38

#: element types a Cast may read (ONNX TensorProto names, lower case) and their size in bytes
CAST_SOURCES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, **STORED_TYPES}


@dataclass(frozen=True)
class UnaryConfig(LayerConfig):
    """Unary elementwise op ``y = f(x)`` on a packed tensor (see :data:`UNARY_OPS`).

    shape: x and y; op: a key of :data:`UNARY_OPS`; exponent: Pow's constant scalar exponent (0 for
    other ops); src: the element type x is stored as when it is not the precision's float type
    (Cast's source; "bool" for Not; an integer type for BitwiseNot and Abs/Neg/Sign on integers;
    "" otherwise); dst: y's element type when it is not the precision's float type ("bool" for
    IsNaN/IsInf/Not and Cast to bool, the integer type for integer ops and Casts to it, "" otherwise);
    alpha, beta: the op's
    attributes (see :data:`UNARY_OPS`; 0 for ops without any).
    Timed: a benanza CUDA kernel (16-byte vectors, float32 math, integer math on integers; always),
    cudnnOpTensor SQRT / NOT for Sqrt / Not, and for the ops the cuDNN graph API has a pointwise
    mode for (GELU_FWD, GELU_APPROX_TANH_FWD, ERF, EXP, LOG, SQRT, RECIPROCAL, NEG, ABS, POW, CEIL,
    COS, FLOOR, SIN, TAN, SOFTPLUS_FWD, SWISH_FWD, LOGICAL_NOT; cudnn-frontend ``Graph::pointwise``) every
    engine config of that one-node graph. FLOPs: numel * the per-element count of
    :data:`UNARY_OPS` (0 for ops on integer or bool data and for Cast).
    """

    kind: ClassVar[str] = "Unary"
    shape: Shape
    op: str
    exponent: float = 0.0
    src: str = ""
    alpha: float = dataclasses.field(default=0.0, metadata=OPTIONAL)
    beta: float = dataclasses.field(default=0.0, metadata=OPTIONAL)
    dst: str = dataclasses.field(default="", metadata=OPTIONAL)

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        if self.src in STORED_TYPES:
            return 0
        return numel(self.shape) * UNARY_OPS[self.op][1]

    def describe(self):
        if self.op == "pow":
            extra = f" ^{self.exponent:g}"
        elif self.op == "cast":
            extra = (f" from {self.src}" if self.src else "") + (f" to {self.dst}" if self.dst else "")
        else:
            extra = f" {self.src or self.dst}" if (self.src or self.dst) else ""
            extra += "".join(f" {n}={v:g}" for n, v in (("alpha", self.alpha), ("beta", self.beta)) if v)
        return f"Unary({self.op}{extra} {'x'.join(map(str, self.shape))})"


#: constant index tensors longer than this are not kept in a Gather config (timed as random indices)
GATHER_MAX_CONSTANT_INDICES = 1024


@dataclass(frozen=True)
class GatherConfig(LayerConfig):
    """ONNX Gather (ONNX operator spec): ``y = take(data, indices, axis)``; embedding lookups and
    index selection (a class token, one of Q/K/V). Costed as the memory traffic it is, not zero.

    data: the data shape; indices: the index tensor's shape; axis >= 0. The call sees data as
    (outer, axis_dim, inner) and y as (outer, n, inner) with n = numel(indices). values: the
    constant index values (normalised to >= 0) when the model fixes them; () when they come from
    data (an embedding lookup: timed with uniform random indices in [0, axis_dim)) or when there are
    more than :data:`GATHER_MAX_CONSTANT_INDICES` of them.
    Timed: a benanza gather kernel with that index pattern (one thread per output element; int64
    indices in device memory); for constant indices also one cudaMemcpy2DAsync per index (rows =
    outer, a row = inner elements), what a framework's copy of a strided view does. FLOPs: 0.
    """

    kind: ClassVar[str] = "Gather"
    data: Shape
    indices: Shape
    axis: int
    values: tuple[int, ...] = ()

    @property
    def batch(self) -> int:
        y = self.output_shape()
        return y[0] if y else 1

    @property
    def outer(self) -> int:
        return numel(self.data[:self.axis])

    @property
    def inner(self) -> int:
        return numel(self.data[self.axis + 1:])

    def input_shapes(self):
        return [self.data, self.indices]

    def output_shape(self):
        return self.data[:self.axis] + self.indices + self.data[self.axis + 1:]

    def flops(self):
        return 0

    def describe(self):
        idx = (f"[{','.join(map(str, self.values[:4]))}{',...' if len(self.values) > 4 else ''}]"
               if self.values else "x".join(map(str, self.indices)) or "scalar")
        return f"Gather({'x'.join(map(str, self.data))} axis {self.axis} idx {idx})"


@dataclass(frozen=True)
class WhereConfig(LayerConfig):
    """ONNX Where (ONNX operator spec): ``y = cond ? a : b`` with numpy broadcasting; cond is bool
    (1 byte per element). cond, a, b: shapes padded to the output rank (at most 8).
    Timed: a benanza CUDA kernel (one thread per output element, broadcast by zero strides).
    FLOPs: 0 (a select moves data; no arithmetic).
    """

    kind: ClassVar[str] = "Where"
    cond: Shape
    a: Shape
    b: Shape

    def input_shapes(self):
        return [self.cond, self.a, self.b]

    def output_shape(self):
        return tuple(max(x, y, z) for x, y, z in zip(self.cond, self.a, self.b))

    def flops(self):
        return 0

    def describe(self):
        return "Where(" + ",".join("x".join(map(str, s)) for s in (self.cond, self.a, self.b)) + ")"


SDPA_MASKS = ("none", "causal", "bias")


@dataclass(frozen=True)
class SdpaConfig(LayerConfig):
    """Scaled dot-product attention as one fused call: ``O = softmax(scale * Q K^T (+ mask)) V``,
    cuDNN's fused flash attention through the cuDNN graph API (cudnn-frontend ``Graph::sdpa``,
    inference: no softmax statistics; cuDNN developer guide, "Scaled Dot Product Attention").

    A fusion candidate only: it stands for the layers MatMul(Q, K^T) -> [Mul/Div by a constant] ->
    [Add mask] -> Softmax(last axis) -> MatMul(., V) of an exported attention (and the Transpose
    that makes K^T from K, and the constant scale of Q and K^T that torch's SDPA decomposition
    emits, when those feed only the pattern), so its measurements are compared with the sum of
    those layers, never with one of them (``model._find_attention``).

    Q: (b, h, s_q, d); K: (b, h, s_kv, d); V: (b, h, s_kv, d_v); O: (b, h, s_q, d_v), all packed,
    d innermost (the layout cuDNN reads; K^T of the graph is K with d innermost). Leading dims of
    rank-3 tensors are b (h = 1). scale: the product of the pattern's constant factors. mask:
    "none"; "causal" (a constant lower-triangular additive mask: cuDNN's causal masking, no bias
    read); "bias" (an additive tensor of shape ``bias``, 4-D, each dim 1 or the full size).
    cuDNN has fused engines for FP16/BF16 (and FP8) data only: fp32/tf32 jobs record what cuDNN
    says (not_supported) and the fused LBL then keeps the unfused sum.
    FLOPs: 2*b*h*s_q*s_kv*(d + d_v) + 7*b*h*s_q*s_kv (scale, mask, softmax).
    """

    kind: ClassVar[str] = "SDPA"
    tensor_cores: ClassVar[bool] = True
    b: int
    h: int
    s_q: int
    s_kv: int
    d: int
    d_v: int
    scale: float
    mask: str = "none"
    bias: Shape = ()
    #: element strides of Q, K, V and O over (b, h, s, d) when the pattern reads its operands as
    #: views of other tensors and writes its output into one (head-split and head-merge
    #: Transposes and Reshapes absorbed, see ``model._find_attention``); () = packed. d's stride
    #: is 1 in every view the pattern finder accepts.
    q_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    k_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    v_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    o_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)

    def strides(self) -> tuple[Shape, Shape, Shape, Shape]:
        """(Q, K, V, O) element strides over (b, h, s, d): the given ones or packed."""
        out = []
        for given, shape in zip((self.q_strides, self.k_strides, self.v_strides, self.o_strides),
                                self.input_shapes() + [self.output_shape()]):
            out.append(tuple(given) if given else _packed_strides(shape))
        return tuple(out)

    def input_shapes(self):
        return [(self.b, self.h, self.s_q, self.d), (self.b, self.h, self.s_kv, self.d),
                (self.b, self.h, self.s_kv, self.d_v)]

    def output_shape(self):
        return (self.b, self.h, self.s_q, self.d_v)

    def flops(self):
        s = self.b * self.h * self.s_q * self.s_kv
        return 2 * s * (self.d + self.d_v) + 7 * s

    def describe(self):
        m = {"none": "", "causal": " causal", "bias": " bias " + "x".join(map(str, self.bias))}[self.mask]
        return (f"SDPA(b{self.b} h{self.h} sq{self.s_q} skv{self.s_kv} d{self.d}"
                f"{'' if self.d_v == self.d else f' dv{self.d_v}'} scale {self.scale:.4g}{m})")


#: every concrete config class by kind
CONFIG_KINDS: dict[str, type[LayerConfig]] = {
    c.kind: c for c in (ConvConfig, ConvBiasActConfig, ConvBnActConfig, ActivationConfig, BatchNormConfig,
                        PoolingConfig, SoftmaxConfig, ElementwiseConfig, GemmConfig, LRNConfig,
                        DropoutConfig, ReduceConfig, CopyConfig, RNNConfig)
}
CONFIG_KINDS.update({c.kind: c for c in (LayerNormConfig, UnaryConfig, GatherConfig, WhereConfig, SdpaConfig,
                                         GemmActConfig)})


def config_from_params(kind: str, params: dict) -> LayerConfig:
    """Rebuild a config from :meth:`LayerConfig.params` output (as stored in the database).

    Raises KeyError for an unknown kind, TypeError for parameters that do not fit it.
    """
    cls = CONFIG_KINDS[kind]

    def build(klass, data):
        kw = {}
        for f in dataclasses.fields(klass):
            if f.name not in data and f.metadata.get("omit_default"):
                continue  # an optional field at its default
            v = data[f.name]
            kw[f.name] = _decode(klass, f, v)
        return klass(**kw)

    def _decode(klass, f, v):
        if klass in (ConvBiasActConfig, ConvBnActConfig) and f.name == "conv":
            return build(ConvConfig, v)
        if klass is GemmActConfig and f.name == "gemm":
            return build(GemmConfig, v)
        if klass is CopyConfig and f.name == "attrs":
            return tuple((name, tuple(vals)) for name, vals in v)
        if klass is CopyConfig and f.name == "inputs":
            return tuple(tuple(s) for s in v)
        if isinstance(v, list):
            return tuple(v)
        if isinstance(v, str) and f.type in ("float",):
            return float(v)
        return v

    return build(cls, params)


def precisions_for(config: LayerConfig, requested: list[str]) -> list[str]:
    """The benchmark precisions needed for ``config`` to serve ``requested`` analysis precisions.

    Layers without Tensor Core math are measured once in float32 (math "none"), which serves both
    fp32 and tf32; Tensor Core layers are measured in each requested precision. tf32 analysis also
    accepts fma measurements, so it needs the fp32 job as well.

    fp8 is a GEMM precision: an fp8 analysis takes FP8 measurements for the kinds in
    :data:`FP8_KINDS` and fp16 measurements (:data:`ACCEPTED_DTYPES`) for everything, so a GEMM
    needs its fp8 and its fp16 job (the fp16 one also covers shapes FP8 does not support) and
    any other layer only its fp16 job; no job runs an fp8 layer without an FP8 implementation.
    """
    out: list[str] = []
    for p in requested:
        if not config.tensor_cores and p == "tf32":
            p = "fp32"
        if p == "fp8":
            need = ["fp8", FP8_FALLBACK] if config.kind in FP8_KINDS else [FP8_FALLBACK]
        else:
            need = [p] + (["fp32"] if p == "tf32" else [])
        for q in need:
            if q not in out:
                out.append(q)
    return out
