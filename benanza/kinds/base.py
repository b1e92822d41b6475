"""What every layer kind shares: the config base class, shapes, the benchmark job and the registry
entry (:class:`Kind`) a kind module fills in."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

from benanza.kinds.backend import Backend
from benanza.spec import LAYOUTS, STEP_PHASES, TRAINING_PHASES  # noqa: F401 (the vocabulary: benanza.spec)


Shape = tuple[int, ...]


#: ``dataclasses.field(metadata=OPTIONAL)`` marks a config field added after configs were first stored:
#: it is left out of the canonical parameters (and so of the key) while it holds its default, so the
#: keys of every config that does not use it stay what they were (databases keep matching).
OPTIONAL = {"omit_default": True}


def stored_as(name: str, **metadata) -> dict:
    """``dataclasses.field(metadata=stored_as("batch"))``: the field's name in the canonical parameters
    (and so in the key and the database's ``params``) when it differs from the Python name: a field
    renamed for clarity keeps the key of every config stored before."""
    return {"param": name, **metadata}


def param_name(f: dataclasses.Field) -> str:
    """The name of a config field in the canonical parameters (:func:`stored_as`; else its own)."""
    return f.metadata.get("param", f.name)


def _omitted(f: dataclasses.Field, value) -> bool:
    return bool(f.metadata.get("omit_default")) and f.default is not dataclasses.MISSING and value == f.default


def _canonical(value):
    """JSON-ready canonical form: tuples become lists, floats keep their repr, dataclasses dicts
    (fields marked :data:`OPTIONAL` left out while they hold their default; each under
    :func:`param_name`)."""
    if dataclasses.is_dataclass(value):
        return {param_name(f): _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not _omitted(f, getattr(value, f.name))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value


def numel(shape: Shape) -> int:
    """Number of elements of a tensor of ``shape``."""
    return math.prod(shape) if shape else 1


def _compute_key(config: "LayerConfig") -> str:
    blob = json.dumps({"kind": config.kind, "params": config.params()}, sort_keys=True, separators=(",", ":"))
    return f"{config.kind.lower()}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


@functools.lru_cache(maxsize=1 << 16)
def _config_key(config: "LayerConfig") -> str:
    """:func:`_compute_key`, once per distinct (equal and of the same type) config."""
    return _compute_key(config)


#: fusion kinds a training step cannot use: inference-only folding (a Conv -> BatchNormalization [->
#: activation] group folds the running statistics, which training replaces by the batch's). The step
#: counts their layers one by one (:func:`benanza.analysis.training.forward_weights`), and ``bench
#: --train`` plans no job for them (:func:`benanza.generation.generator.plan_jobs`)
INFERENCE_ONLY_FUSIONS = ("ConvBnAct",)


def training_counts_layers(cfg) -> bool:
    """Whether a training step counts a fusion candidate of config ``cfg`` layer by layer, taking no
    fused call for it: the inference-only folds (:data:`INFERENCE_ONLY_FUSIONS`), and a residual Add
    fused into the norm after it (a LayerNorm or RMSNorm config with ``residual``), whose training
    forward (the norm writing its statistics beside the sum) and backward are not built: the step keeps
    the Add and the norm's own training calls (a decomposed norm's group, the Add its first layer: the
    decomposed norm's fused training calls, :func:`benanza.processing.training.training_plan`)."""
    return cfg.kind in INFERENCE_ONLY_FUSIONS or bool(getattr(cfg, "residual", False))


class RowNorm:
    """The row view of a normalisation over the trailing axes (LayerNorm, RMSNorm and their gradients):
    a config with ``x`` (its input shape) and ``axis`` (the first normalised dim) has ``rows`` =
    prod(x[:axis]) independent rows of ``cols`` = prod(x[axis:]) elements each (ONNX
    LayerNormalization-17 / RMSNormalization-23: the statistics are over x[axis:])."""

    x: Shape
    axis: int

    @property
    def rows(self) -> int:
        return numel(self.x[:self.axis])

    @property
    def cols(self) -> int:
        return numel(self.x[self.axis:])


@dataclass(frozen=True)
class LayerConfig:
    """Base class of layer configs (frozen dataclasses; fields are the call's parameters)."""

    kind: ClassVar[str] = "Layer"
    #: True when TF32/FP16 Tensor Core math changes the library call (convolutions, GEMMs)
    tensor_cores: ClassVar[bool] = False

    def params(self) -> dict:
        """Canonical parameters (JSON-ready, deterministic)."""
        return _canonical(self)

    @functools.cached_property
    def key(self) -> str:
        """Stable identifier: ``<kind>-<16 hex digits of sha256(canonical JSON)>`` (computed once per
        config, and once per distinct config of a model: equal configs share it)."""
        try:
            return _config_key(self)
        except TypeError:  # a field that cannot be hashed: computed here
            return _compute_key(self)

    @property
    def batch_count(self) -> int:
        """How many independent instances of the operation one call computes: dim 0 of the first input
        by default (N of an (N, C, ...) tensor); a GEMM's number of products
        (:attr:`benanza.kinds.gemm.GemmConfig.batch_count`, 1 for one product); the ``batch`` of a kind
        that names its batch itself (RNN: its batch of sequences; Gather: dim 0 of its output). What
        the database stores as ``layer_configs.batch``.

        Not the model's batch (:attr:`benanza.processing.model.ModelLayers.batch`, ``models.batch``):
        a GEMM folds the model's batch into M (resnet50's classifier at batch 32 is M = 32,
        batch_count 1), and one config serves every model and batch that has it."""
        if hasattr(self, "batch"):  # the base class has no ``batch``: a kind that names its own
            return self.batch
        shapes = self.input_shapes()
        return shapes[0][0] if shapes and shapes[0] else 1

    def input_shapes(self) -> list[Shape]:
        raise NotImplementedError

    def output_shape(self) -> Shape:
        raise NotImplementedError

    def flops(self) -> int:
        """Floating-point operations of one forward call (multiply-add = 2)."""
        return numel(self.output_shape())

    def fusion_label(self) -> str:
        """How ``benanza layers`` counts a fusion candidate of this config (``fusions_by_kind``): its
        kind; a kind whose fusion candidates name a pattern rather than a library call says so (Gelu,
        SiLU, SwiGLU, Add+LayerNorm)."""
        return self.kind

    def describe(self) -> str:
        """Short human-readable description: kind and shapes."""
        ins = ",".join("x".join(map(str, s)) for s in self.input_shapes())
        return f"{self.kind}({ins} -> {'x'.join(map(str, self.output_shape()))})"


#: element types a layer may store besides the precision's float type (ONNX TensorProto names,
#: lower case) and their size in bytes; bool is ONNX's one byte per element
STORED_TYPES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                "uint64": 8}


def channels_last(shape) -> list[int]:
    """(N, C, s1, s2...) -> (N, s1, s2..., C): the order an NHWC tensor's memory is packed in."""
    s = list(shape)
    return s if len(s) < 3 else [s[0]] + s[2:] + [s[1]]


#: the layouts a job can time (NCHW: the model's; NHWC: channels-last; :data:`benanza.spec.LAYOUTS`)
JOB_LAYOUTS = LAYOUTS
#: what-if layouts: measurements a job records beside its own layout, of a memory layout the model does
#: not feed (``PAGED_KV``: SDPA over a paged KV cache, :mod:`benanza.kinds.sdpa`), each owned by the job
#: layout that records it (its rows are replaced with that job's). No analysis serves them
#: (:class:`benanza.database.query.Serves` takes NCHW and NHWC only): reported, never a layer's minimum.
WHATIF_LAYOUTS = {"PAGED_KV": "NCHW"}


def owning_layout(layout: str) -> str:
    """The job layout whose job records rows of ``layout`` (a :data:`WHATIF_LAYOUTS` entry's owner, else itself)."""
    return WHATIF_LAYOUTS.get(layout, layout)


def row_layouts(job_layout: str) -> tuple[str, ...]:
    """The row layouts a job of ``job_layout`` owns: its own and its :data:`WHATIF_LAYOUTS`."""
    return (job_layout,) + tuple(k for k, v in WHATIF_LAYOUTS.items() if v == job_layout)


@dataclass(frozen=True)
class JobId:
    """A job's id as a value: ``KEY.PRECISION[.nhwc][.torch]`` (``str(JobId)``), built by the
    generator and read by the runner and the database through :meth:`parse`, never by string
    surgery. ``key``: the layer config's key; ``precision``: a precision name; ``layout``: NCHW or
    NHWC; ``backend``: who times the config (:class:`benanza.kinds.backend.Backend`: the generated
    suite's cuDNN, cuBLAS and benanza's kernels, or the framework's own kernels, whose id ends in the
    backend's :attr:`~benanza.kinds.backend.Backend.job_suffix`, ``.torch``). Raises ValueError for a
    malformed id."""

    key: str
    precision: str
    layout: str = "NCHW"
    backend: Backend = Backend.SUITE

    def __post_init__(self):
        if self.layout not in JOB_LAYOUTS:
            raise ValueError(f"job layout must be one of {', '.join(JOB_LAYOUTS)}, not {self.layout!r}")
        if not self.key or not self.precision or "." in self.precision:
            raise ValueError(f"malformed job id parts: key {self.key!r}, precision {self.precision!r}")
        if not isinstance(self.backend, Backend):
            raise ValueError(f"job backend must be a Backend, not {self.backend!r}")

    def __str__(self) -> str:
        return (f"{self.key}.{self.precision}" + ("" if self.layout == "NCHW" else f".{self.layout.lower()}")
                + self.backend.job_suffix)

    @classmethod
    def parse(cls, text: str) -> "JobId":
        """The id ``text`` (``KEY.PRECISION[.nhwc][.torch]``) as a value; ValueError when it has no
        precision part."""
        backend = Backend.of_job(text)
        rest = text[:len(text) - len(backend.job_suffix)]
        layout = "NHWC" if rest.endswith(".nhwc") else "NCHW"
        if layout == "NHWC":
            rest = rest[:-len(".nhwc")]
        key, dot, precision = rest.rpartition(".")
        if not dot:
            raise ValueError(f"not a job id: {text!r} (expected KEY.PRECISION[.nhwc][.torch])")
        return cls(key, precision, layout, backend)

    @property
    def framework(self) -> bool:
        """The framework's own kernels (:attr:`benanza.kinds.backend.Backend.framework`)."""
        return self.backend.framework

    @property
    def source(self) -> str:
        """``framework`` (the framework's own kernels) or ``library`` (the generated suite's job)."""
        return self.backend.source

    def with_backend(self, backend: Backend) -> "JobId":
        """The job of the same config, precision and layout timed by ``backend``."""
        return dataclasses.replace(self, backend=backend)

    def as_framework(self) -> "JobId":
        """The framework job (PyTorch eager) of the same config, precision and layout."""
        return self.with_backend(Backend.TORCH_EAGER)


@dataclass(frozen=True)
class Job:
    """One benchmark job: a layer config measured in one precision (and tensor layout).

    A job has no batch of its own: its config serves every model and model batch that has it (the
    model's batch is :attr:`benanza.processing.model.ModelLayers.batch`, in a suite's manifest under
    ``models``); ``config.batch_count`` is the config's own count of instances per call."""

    id: str
    config: LayerConfig
    precision: str
    node: str  # one ONNX node name using this config (untrusted)
    layout: str = "NCHW"  # NHWC: the layer on channels-last tensors (convolutions and their neighbours)

    @property
    def layer_key(self) -> str:
        return self.config.key

    @property
    def kind(self) -> str:
        return self.config.kind

    def to_dict(self) -> dict:
        return {"job": self.id, "layer_key": self.layer_key, "kind": self.kind,
                "precision": self.precision, "node": self.node, "layout": self.layout,
                "description": self.config.describe(), "params": self.config.params(),
                "batch_count": self.config.batch_count}


def io_bytes(cfg: LayerConfig, ib: int, ob: int) -> int:
    """Minimum bytes of a layer that reads each input once and writes its output once: ``ib`` bytes per
    input element, ``ob`` per output element (Williams et al., "Roofline", CACM 2009: the compulsory
    traffic of the kernel)."""
    return ib * sum(numel(s) for s in cfg.input_shapes()) + ob * numel(cfg.output_shape())


@dataclass(frozen=True)
class Kind:
    """One layer kind's whole slice, the registry entry (:data:`benanza.kinds.REGISTRY`) every stage reads.

    - ``example``: a config of the kind from a real model (the registry test builds its case, bytes,
      FLOPs and PyTorch candidate).
    - ``name``: the kind (``LayerConfig.kind``), as the database, the suites and ``--kinds`` spell it.
    - ``config``: the frozen config dataclass; ``config.flops()`` gives the FLOPs of one call
      (multiply-add = 2).
    - ``template``: the Jinja template under ``templates/`` that renders the kind's C++ suite.
    - ``case``: ``(config, Job) -> case``, the typed value one row of the template's case table renders.
    - ``min_bytes``: ``(config, input bytes per element, output bytes per element) -> bytes``, the
      fewest bytes the layer moves to and from memory (the roofline's arithmetic intensity).
    - ``torch``: ``(benanza.kinds.framework.Ctx) -> Candidate``, the PyTorch call timed as the
      framework's own implementation of the layer.
    - ``onnx``: ONNX op type -> mapper ``(node, MapContext, attributes) -> config`` (raises
      :class:`benanza.kinds.onnx_map.Unsupported`); empty for a kind only fusion produces.
    - ``typed_ops``: ONNX ops whose mapper checks element types itself (the others must read a float tensor).
    - ``fused_from``: the ONNX op types of the fusion candidate the kind measures as one call.
    - ``aten``: ONNX op -> the ATen ops of a PyTorch profile that implement it (``profiles.join``).
    - ``nhwc``: the kind is also measured on channels-last tensors; ``image``: its tensors carry the
      layout of a neighbouring convolution (layout propagation in the generator).
    - ``nhwc_job``: ``(config, neighbour) -> bool``, whether a config of an ``nhwc`` kind gets its
      channels-last job (``neighbour``: it reads a convolution's image); None: every config does.
    - ``backward``: ``config -> ((phase, config), ...)``, the calls of the layer's backward pass in a
      training step, each with its phase of :data:`TRAINING_PHASES` (``backward_data``: the gradient
      of the layer's input; ``backward_weight``: of its weights and bias), data gradient first. A
      backward call may be a config of another kind (a GEMM's gradients are GEMMs). An empty tuple:
      the gradient passes through unchanged, no call (an Add of two same-shape tensors). A call of
      phase ``forward``: the layer's training-mode forward, which replaces its inference call in a
      training step (BatchNormalization with the batch's statistics, Dropout drawing its mask). None (the
      field, or the function's result for one config): no backward pass in benanza yet, so a training
      step of a model with it is incomplete, and says so.
    - ``phase``: the phase of :data:`STEP_PHASES` the kind's own calls belong to: ``forward`` for
      a layer of the model's graph; ``optimizer`` for the optimizer step (:mod:`benanza.kinds.optimizer`),
      which no ONNX op maps to (its config comes from the model's parameters, so ``onnx`` is empty);
      ``loss`` for the loss on the model's output (:mod:`benanza.kinds.cross_entropy_loss`, likewise).
    - ``backward_of``: forward kind name -> its ``backward`` function, for a backward kind (one that maps
      no ONNX op: processing makes its configs from the forward layers' configs). The registry
      (:mod:`benanza.kinds`) installs each function as the forward kind's ``backward``: the forward
      kind's module cannot name its backward kind's configs, as that module imports it (no import
      circles).
    - ``contrib``: (domain, op type) -> :class:`benanza.kinds.onnx_map.ContribOp`, the operators onnx does
      not define that the kind maps (ONNX Runtime's ``com.microsoft`` contrib ops and its default-domain
      ``SimplifiedLayerNormalization``), each with its mapper, its output-shape rule and its spec.
    - ``patterns``: the :class:`benanza.kinds.patterns.Pattern` s that find the kind's fusion candidates
      in a layer graph (a decomposed LayerNorm, Conv -> Relu, ...), each with its place in the order
      processing runs them in.
    """

    example: LayerConfig
    name: str
    config: type[LayerConfig]
    template: str
    case: Callable[[Any, Job], Any]
    min_bytes: Callable[[Any, int, int], int]
    torch: Callable[[Any], Any]
    onnx: Mapping[str, Callable] = dataclasses.field(default_factory=dict)
    typed_ops: tuple[str, ...] = ()
    fused_from: tuple[str, ...] = ()
    aten: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    nhwc: bool = False
    image: bool = False
    nhwc_job: Callable[[Any, bool], bool] | None = None
    backward: Callable[[Any], tuple] | None = None
    phase: str = "forward"
    backward_of: Mapping[str, Callable[[Any], tuple]] = dataclasses.field(default_factory=dict)
    contrib: Mapping[tuple[str, str], Any] = dataclasses.field(default_factory=dict)
    patterns: tuple[Any, ...] = ()

    def __post_init__(self):
        if self.phase not in STEP_PHASES:
            raise ValueError(f"kind {self.name}: phase {self.phase!r} is not one of {', '.join(STEP_PHASES)}")
