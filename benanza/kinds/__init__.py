"""Typed layer configurations: the unit the generator, the database and the analyzer share.

A *layer config* holds every parameter that changes the library call for one ONNX node: the kind of
call, the tensor shapes (batch included) and the call's attributes. Two nodes with equal configs do
the same work, so they are benchmarked once; the canonical :pyattr:`LayerConfig.key` identifies a
config across runs and machines (it is a hash of a canonical JSON of the kind and parameters; it
contains no node or tensor names). The data type is *not* part of a config: a config is measured
once per precision (:data:`PRECISIONS`).

Shapes are tuples of ints in ONNX order (NCHW for images). Sizes are elements unless a name says
bytes. FLOPs count a multiply-add as two floating-point operations.

The package holds one module per layer kind, each with its whole slice (config, ONNX mapping, fusion
patterns, case, minimum bytes, PyTorch candidate, ATen ops), and :data:`REGISTRY`, the one list of kinds
every stage reads, made of every module here that has a ``KIND``. Adding a kind: its module here, its
template under ``templates/``, its test, and its example's key in ``tests/test_kinds_registry.py``
(which checks that each entry is whole); a fused kind's pattern is a :class:`benanza.kinds.patterns.Pattern`
in its ``KIND`` (:data:`PATTERNS`).
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil

from benanza.kinds.base import (TRAINING_PHASES, STEP_PHASES, INFERENCE_ONLY_FUSIONS, training_counts_layers, Shape, OPTIONAL, numel, LayerConfig, STORED_TYPES, Job, Kind, channels_last, io_bytes, param_name)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.precision import (PRECISIONS, PRECISION_DTYPE, FP8_KINDS, FP8_OUTPUT_BYTES, FP8_FALLBACK, ACCEPTED_MATH, ACCEPTED_DTYPES, CONV_KINDS, CUDNN_TF32_KINDS, DTYPE_BYTES)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.conv import (ConvConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.conv_bwd_data import (ConvBwdDataConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.conv_bwd_filter import (ConvBwdFilterConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.conv_bias_act import (ConvBiasActConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.conv_bn_act import (ConvBnActConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.activation import (ACTIVATION_MODES, ActivationConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.batchnorm import (BatchNormConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.pooling import (PoolingConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.softmax import (SoftmaxConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.elementwise import (ELEMENTWISE_OPS, ElementwiseConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.gemm import (GemmConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.lrn import (LRNConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.dropout import (DropoutConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.reduce import (REDUCE_OPS, ReduceConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.copy import (Transfer, packed_strides, CopyConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.rnn import (RNN_GATES, RNN_DIRECTIONS, RNNConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.layernorm import (LayerNormConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.rmsnorm import (RMSNormConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.rmsnorm_backward import (RMSNormBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.rotary import (ROTARY_LAYOUTS, RotaryConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.unary import (UNARY_OPS, FLT_MAX, CAST_SOURCES, UnaryConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.gather import (GATHER_MAX_CONSTANT_INDICES, GatherConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.where import (WhereConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.sdpa import (SDPA_MASKS, SdpaConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.gemm_act import (GEMM_ACTIVATIONS, GemmActConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.optimizer import (OPTIMIZER_ALGORITHMS, OptimizerConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.gemm_act_backward import (GemmActBackwardConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.activation_backward import (BACKWARD_MODES, ActivationBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.pooling_backward import (PoolingBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.softmax_backward import (SoftmaxBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.batchnorm_train import (BatchNormTrainConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.batchnorm_backward import (BatchNormBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.dropout_backward import (DropoutBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.gather_backward import (GatherBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.cross_entropy_loss import (CrossEntropyLossConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.layernorm_backward import (LayerNormBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.unary_backward import (UNARY_BACKWARD, UnaryBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.rnn_train import (RNN_TRAIN_CALLS, RNNTrainConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.sdpa_backward import (SdpaBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.trilu import (TriluConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.cumsum import (CumSumConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.grouped_gemm import (GroupedGemmConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.topk import (TOPK_INTS, TopKConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.scatter import (SCATTER_REDUCTIONS, ScatterConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.gather_elements import (GatherElementsConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.nonzero import (NonZeroConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.resize import (ResizeConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.lrn_backward import (LRNBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.resize_backward import (ResizeBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.swiglu_backward import (SwiGLUBwdConfig)  # noqa: F401 (the kinds' namespace)
from benanza.kinds.patterns import Pattern

def _modules() -> list:
    """Every module of this package (``benanza/kinds/<name>.py``, none whose name starts with ``_``),
    imported, by name: a kind registers itself by its module's ``KIND``, no list names it."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg and not m.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


_ALL = _modules()

#: the modules of every layer kind (``benanza/kinds/<name>.py`` with its ``KIND``), by module name
_MODULES = tuple(m for m in _ALL if isinstance(getattr(m, "KIND", None), Kind))

#: modules that are no kind's home but hold a kind's backward function (``BACKWARD``: forward kind ->
#: function), for a backward made of other kinds' configs whose modules import the forward kind's
#: (``elementwise_backward``)
_BACKWARD_MODULES = tuple(m for m in _ALL if m not in _MODULES and isinstance(getattr(m, "BACKWARD", None), dict))

#: modules that are no kind's home but add ONNX mappers to a kind (``ONNX``: kind -> {op type: mapper}),
#: for an op made of other kinds' configs whose modules import the kind's module (``einsum``)
_MAPPER_MODULES = tuple(m for m in _ALL if m not in _MODULES and isinstance(getattr(m, "ONNX", None), dict))


def _registry() -> dict[str, Kind]:
    """The kinds by name, each forward kind with the ``backward`` a backward kind (``Kind.backward_of``)
    or a backward module (``BACKWARD``) gives it, and the ONNX mappers a mapper module (``ONNX``) adds.
    Raises ValueError for two backwards of one kind, a backward of an unknown kind, or a mapper of an
    op type some kind maps already."""
    kinds = {m.KIND.name: m.KIND for m in _MODULES}
    for m in _MAPPER_MODULES:
        for name, ops in m.ONNX.items():
            taken = {op for k in kinds.values() for op in k.onnx}
            if name not in kinds or taken & set(ops):
                raise ValueError(f"ONNX mappers for {name!r}: no such kind, or op types mapped already")
            kinds[name] = dataclasses.replace(kinds[name], onnx={**kinds[name].onnx, **ops})
    given = [fns for fns in (getattr(m, "BACKWARD", {}) for m in _BACKWARD_MODULES)]
    given += [k.backward_of for k in list(kinds.values())]
    for fns in given:
        for name, fn in fns.items():
            if name not in kinds or kinds[name].backward is not None:
                raise ValueError(f"a backward for {name!r}, which is no kind or has one already")
            kinds[name] = dataclasses.replace(kinds[name], backward=fn)
    return kinds


#: every layer kind by name (:class:`benanza.kinds.base.Kind`)
REGISTRY: dict[str, Kind] = _registry()

#: every concrete config class by kind
CONFIG_KINDS: dict[str, type[LayerConfig]] = {k.name: k.config for k in REGISTRY.values()}

#: every kind's fusion patterns (``Kind.patterns``), in the order processing runs them
#: (:attr:`benanza.kinds.patterns.Pattern.order`; :func:`benanza.kinds.patterns.passes` groups them)
PATTERNS: tuple[Pattern, ...] = tuple(sorted((p for k in REGISTRY.values() for p in k.patterns), key=lambda p: p.order))

def config_from_params(kind: str, params: dict) -> LayerConfig:
    """Rebuild a config from :meth:`LayerConfig.params` output (as stored in the database).

    Raises KeyError for an unknown kind, TypeError for parameters that do not fit it.
    """
    cls = CONFIG_KINDS[kind]

    def build(klass, data):
        kw = {}
        for f in dataclasses.fields(klass):
            name = param_name(f)  # the field's name in the stored parameters
            if name not in data and f.metadata.get("omit_default"):
                continue  # an optional field at its default
            v = data[name]
            kw[f.name] = _decode(klass, f, v)
        return klass(**kw)

    def _decode(klass, f, v):
        if klass in (ConvBiasActConfig, ConvBnActConfig, ConvBwdDataConfig, ConvBwdFilterConfig) and f.name == "conv":
            return build(ConvConfig, v)
        if klass in (GemmActConfig, GemmActBackwardConfig) and f.name == "gemm":
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
