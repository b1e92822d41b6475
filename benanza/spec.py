"""benanza's vocabulary: every user-facing concept defined and validated once, as typed frozen values.

Each concept has one definition here and one parser from the command line's words; the stages, the
use cases (:mod:`benanza.usecases`), the Python API and the CLI all take these values, so a word means
the same everywhere and a bad one is refused at the edge with one line (``benanza: ...``, a
:class:`benanza.errors.UsageError`).

- **precision** (:class:`Precision`, :data:`PRECISION_TABLE`): a measurement's data type and math mode
  (``fp32`` is float32 with FMA math only, everywhere benanza times layers: ``bench``, ``analyze``,
  ``roofline``, ``predict``, ``db``);
- **framework dtype** (:class:`FrameworkDtype`, :data:`FRAMEWORK_DTYPES`): what ``--dtype`` means for a
  PyTorch run (``profile``, ``torch``), mapped onto a precision: ``fp32`` is PyTorch's default (TF32
  convolutions, FP32 matmuls) for a module (``torch``), and TF32 off for an ONNX model run in PyTorch
  (``profile``); each command's ``--help`` says which (:data:`DTYPE_HELP`);
- **layouts** (:data:`LAYOUTS`), **cache** (:data:`CACHES`), **phase** (:class:`Phase`: inference or
  training x a decoder's prefill or decode), **optimizer** (:data:`OPTIMIZERS`), the phase names of a
  training step (:data:`STEP_PHASES`, :data:`TRAINING_PHASES`, :data:`PROFILED_STEP_PHASES`) and of one
  harness measurement (:data:`HARNESS_PHASES`);
- **timing** (:class:`Timing`): the one home of the timing defaults, read by
  :class:`benanza.runner.run.RunOptions`, :class:`benanza.profiles.torch_candidates.Policy` and the
  CLI's options (the C++ harness's own defaults, ``cpp/include/benanza/harness.hpp``, match them);
- **devices**, **dims**, **batches** (:func:`parse_devices`, :func:`parse_dims`, :func:`parse_batches`);
- **requests** (:class:`Scenario`, :class:`AnalyzeRequest`, :class:`PredictRequest`,
  :class:`RooflineRequest`, :class:`BenchRequest`, :class:`TorchRequest`): frozen values the use cases
  take instead of long positional parameter lists.

This module imports nothing of benanza but :mod:`benanza.errors`: every stage may import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benanza.errors import UsageError, missing_file_reason

# -------------------------------------------------------------------------------------- precision


@dataclass(frozen=True)
class Precision:
    """One precision: ``name`` (fp32, tf32, ...), ``dtype`` (the storage data type), ``bytes`` (per
    element of that data type), ``cpp`` (its ``benanza::Precision`` enumerator), ``accepted_math``
    (the math modes whose measurements serve an analysis in it), ``torch_dtype`` (the torch dtype of
    its PyTorch candidates; "" when PyTorch has no eager path) and ``tensor_cores`` (Tensor Core math).
    Math modes: cuDNN's ``cudnnMathType_t`` and cuBLAS's compute types (NVIDIA cuDNN API reference)."""

    name: str
    dtype: str
    bytes: int
    cpp: str
    accepted_math: tuple[str, ...]
    torch_dtype: str
    tensor_cores: bool

    @staticmethod
    def of(name: str) -> "Precision":
        """The precision called ``name``. Raises UsageError naming the valid ones."""
        try:
            return PRECISION_TABLE[name]
        except KeyError:
            raise UsageError(f"unknown data type {name!r} (choose from {', '.join(PRECISION_TABLE)})") from None


#: every precision, in the order of the C++ enum (``benanza::Precision``): fp32 (float32, FMA only),
#: tf32 (float32, TF32 Tensor Cores), fp16 / bf16 (Tensor Cores, float32 accumulation), fp8 (E4M3
#: GEMM inputs on Hopper Tensor Cores, the other layers in fp16)
PRECISION_TABLE: dict[str, Precision] = {p.name: p for p in (
    Precision("fp32", "float32", 4, "FP32", ("fma", "none"), "float32", False),
    Precision("tf32", "float32", 4, "TF32", ("fma", "tf32", "none"), "float32", True),
    Precision("fp16", "float16", 2, "FP16", ("tensor_op", "fma", "none"), "float16", True),
    Precision("bf16", "bfloat16", 2, "BF16", ("tensor_op", "fma", "none"), "bfloat16", True),
    Precision("fp8", "float8_e4m3", 1, "FP8", ("fp8", "fp8_fast_accum", "fp8_block128", "tensor_op", "fma", "none"), "",
              True),
)}


def precision(value) -> Precision:
    """A :class:`Precision` from itself or its name (``fp16``; case-insensitive). Raises UsageError
    naming the valid ones."""
    if isinstance(value, Precision):
        return value
    return Precision.of(str(value).strip().lower())


def parse_precisions(text) -> list[str]:
    """``"fp32,fp16"`` (or a sequence of names) -> precision names, in order, without repeats. Raises
    UsageError for an unknown data type or none given."""
    out: list[str] = []
    for part in (str(text).split(",") if isinstance(text, str) else [str(x) for x in text]):
        if part.strip():
            name = Precision.of(part.strip().lower()).name
            out += [] if name in out else [name]
    if not out:
        raise UsageError("no data type given")
    return out


def conv_precision(conv_tf32: bool, precisions) -> str | None:
    """``tf32`` for ``--conv-tf32`` (PyTorch's fp32 default: TF32 convolutions and cuDNN RNNs, FP32
    matmuls; valid with ``--dtype fp32`` alone), else None. Raises UsageError otherwise."""
    if not conv_tf32:
        return None
    if list(precisions) != ["fp32"]:
        raise UsageError("--conv-tf32 goes with --dtype fp32 only (PyTorch's fp32 default: TF32 convolutions)")
    return "tf32"


@dataclass(frozen=True)
class FrameworkDtype:
    """A framework run's ``--dtype`` (``name``) mapped onto benanza's precisions: the layers'
    ``precision`` and the convolutions' ``conv_precision`` (None: the layers'), with what it means to
    PyTorch (``meaning``: ``torch.backends.cudnn.allow_tf32`` / ``torch.backends.cuda.matmul.allow_tf32``)."""

    name: str
    precision: str
    conv_precision: str | None
    meaning: str


#: the data types of a PyTorch run, in the order the commands list them
FRAMEWORK_DTYPES: dict[str, FrameworkDtype] = {d.name: d for d in (
    FrameworkDtype("fp32", "fp32", "tf32", "PyTorch's default: TF32 convolutions, FP32 matmuls"),
    FrameworkDtype("tf32", "tf32", None, "TF32 convolutions and matmuls"),
    FrameworkDtype("fp16", "fp16", None, "float16"),
    FrameworkDtype("bf16", "bf16", None, "bfloat16"),
)}


def framework_dtype(name: str, command: str = "") -> FrameworkDtype:
    """The :class:`FrameworkDtype` called ``name``; raises UsageError naming ``command`` and the
    valid ones."""
    try:
        return FRAMEWORK_DTYPES[name]
    except KeyError:
        where = f" for benanza {command}" if command else ""
        raise UsageError(f"unknown data type {name!r}{where} (choose from {', '.join(FRAMEWORK_DTYPES)})") from None


#: what ``--dtype`` means, per command family: one meaning of ``fp32`` per command
DTYPE_HELP = {
    "suite": "data types: fp32 (FMA), tf32, fp16, bf16, fp8 (FP8 GEMMs, the rest fp16)",
    "analysis": "data types: fp32, tf32, fp16, bf16, fp8",
    "one": "data type: fp32, tf32, fp16, bf16, fp8",
    "profile": "fp32 (TF32 off), tf32, fp16 or bf16",
    "torch": "fp32 (PyTorch's default: TF32 convolutions, FP32 matmuls), tf32, fp16 or bf16",
}

# ---------------------------------------------------------------------------------- layouts, cache

#: tensor layouts a suite can time; NHWC applies to convolutions and their neighbours
LAYOUTS = ("NCHW", "NHWC")
#: the layouts a layer may run in unless the scenario says otherwise: convolutions and their
#: neighbours may run channels-last, layout conversions reported apart
DEFAULT_LAYOUTS = ("NCHW", "NHWC")
#: which measurements: warm (back-to-back calls, the default) or cold (L2 flushed before each call)
CACHES = ("warm", "cold")


def parse_layouts(text) -> list[str]:
    """``"nchw,nhwc"`` (or a sequence of names) -> upper-case layouts in the order given, no repeats,
    at least one. Raises UsageError naming the valid ones."""
    out: list[str] = []
    for part in (str(text).split(",") if isinstance(text, str) else [str(x) for x in text]):
        v = part.strip().upper()
        if not v:
            continue
        if v not in LAYOUTS:
            raise UsageError(f"unknown layout {part.strip()!r} (choose from nchw, nhwc)")
        out += [] if v in out else [v]
    if not out:
        raise UsageError("no layout given")
    return out


def layouts(value) -> tuple[str, ...]:
    """Layouts from ``"nchw,nhwc"`` or a sequence of names, in :data:`LAYOUTS` order."""
    names = parse_layouts(value)
    return tuple(x for x in LAYOUTS if x in names)


def cache(value: str) -> str:
    """``warm`` or ``cold``. Raises UsageError otherwise."""
    if value not in CACHES:
        raise UsageError(f"--cache must be warm or cold, got {value!r}")
    return value

# ------------------------------------------------------------------------------------------ phases


#: what is run: a forward pass or a training step
MODES = ("inference", "training")
#: the phases of a decoder, and what their step's time is to a user
DECODER_PHASES = {"prefill": "time to first token (TTFT)", "decode": "time per output token (TPOT)"}
#: the forms of a multi-head latent attention (MLA: DeepSeek-V2/V3) decode step ``--mla`` chooses, and what
#: each is (:mod:`benanza.processing.mla`): the LBL of a decode step is the one of the form it exported
MLA_FORMS = {"transformers": "transformers' form: the latent cache re-expanded into per-head keys and values "
                             "(kv_b_proj over every cached token) each step",
             "absorbed": "the weight-absorbed form serving engines run (vLLM, SGLang; FlashMLA): one attention "
                         "of the heads over the latent cache (MQA, d_qk = kv_lora_rank + qk_rope_head_dim, "
                         "d_v = kv_lora_rank), the cache read once"}
#: the phases of benanza's training-step calls (each kind's training calls name theirs)
TRAINING_PHASES = ("forward", "backward_data", "backward_weight", "optimizer")
#: the phases of benanza's training step, in order (the loss between forward and backward)
STEP_PHASES = ("forward", "loss", "backward_data", "backward_weight", "optimizer")
#: the phases of a profiled PyTorch training iteration, in order, each in
#: ``record_function("benanza.phase:NAME")``
PROFILED_STEP_PHASES = ("zero_grad", "forward", "loss", "backward", "optimizer")
#: the harness's phases of one measurement (``cost_ms`` with ``--profile``; harness.cpp's ``measure``)
HARNESS_PHASES = ("first", "warmup", "capture", "screen", "warm", "cold")


@dataclass(frozen=True)
class Phase:
    """What one run is of: ``mode`` (:data:`MODES`: ``inference`` or ``training``) x ``decoder``
    (:data:`DECODER_PHASES`: a decoder's ``prefill``, the prompt's forward pass, or ``decode``, one
    token against a KV cache; a training step has prefill only). Raises UsageError for a bad pair."""

    mode: str = "inference"
    decoder: str = "prefill"

    def __post_init__(self):
        if self.mode not in MODES:
            raise UsageError(f"unknown phase {self.mode!r} (choose from {', '.join(MODES)})")
        if self.decoder not in DECODER_PHASES:
            raise UsageError(f"--phase {self.decoder!r}: choose {' or '.join(DECODER_PHASES)}")
        if self.mode == "training" and self.decoder != "prefill":
            raise UsageError("--train: a training step has no decode phase (leave --phase out)")

    @property
    def training(self) -> bool:
        return self.mode == "training"

    @classmethod
    def of(cls, value) -> "Phase":
        """From itself, ``inference``, ``train``/``training``, ``prefill`` or ``decode``."""
        if isinstance(value, Phase):
            return value
        v = str(value).strip().lower()
        if v in DECODER_PHASES:
            return cls("inference", v)
        return cls("training" if v == "train" else v)

# --------------------------------------------------------------------------------------- optimizer


@dataclass(frozen=True)
class Optimizer:
    """A training step's optimizer: ``name``, the torch.optim class it is (``torch_class``), its C++
    ``OptimizerAlgo`` enumerator (``cpp``, cpp/include/benanza/optimizer.hpp), ``state``
    (optimizer-state tensors per parameter tensor, that the memory bound holds: SGD's momentum 1,
    Adam's two moments 2), ``profiled`` (the torch.optim arguments of a profiled PyTorch training step,
    ``foreach`` at its default) and ``timed`` (the hyper-parameters of benanza's timed step: they change
    no work, only which terms exist does; PyTorch's defaults, SGD at lr 0.01 with momentum 0.9, weight
    decay 1e-2 wherever its flag is set)."""

    name: str
    torch_class: str
    cpp: str
    state: int
    profiled: tuple[tuple[str, float], ...]
    timed: tuple[tuple[str, float], ...]


#: the optimizers benanza times and profiles
OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (
    Optimizer("sgd", "SGD", "OptimizerAlgo::SGD", 1, (("lr", 1e-3), ("momentum", 0.9)),
              (("lr", 0.01), ("momentum", 0.9), ("dampening", 0.0), ("weight_decay", 1e-2))),
    Optimizer("adam", "Adam", "OptimizerAlgo::ADAM", 2, (("lr", 1e-4),),
              (("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8), ("weight_decay", 1e-2))),
    Optimizer("adamw", "AdamW", "OptimizerAlgo::ADAMW", 2, (("lr", 1e-4),),
              (("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8), ("weight_decay", 1e-2))),
)}
#: the optimizer when ``--train`` names none
DEFAULT_OPTIMIZER = "sgd"


def optimizer(name: str | None, train: bool = True) -> str:
    """The optimizer of a training step: ``name`` (None: :data:`DEFAULT_OPTIMIZER`). Raises
    UsageError for an unknown name, and for a name given without ``train`` (``--optimizer`` goes with
    ``--train`` in every command)."""
    if name is not None and not train:
        raise UsageError("--optimizer goes with --train (the optimizer of the training step)")
    name = DEFAULT_OPTIMIZER if name is None else name
    if name not in OPTIMIZERS:
        raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")
    return name

# ------------------------------------------------------------------------------------------ timing


#: cold-cache figures for: each job's contenders (its chosen call and those within 5 %), all, none
COLD_POLICIES = ("contenders", "all", "none")


@dataclass(frozen=True)
class Timing:
    """How layers are timed: the one home of the timing defaults (``benanza bench`` and ``run``
    declare their options from :data:`TIMING`; :class:`benanza.runner.run.RunOptions` and
    :class:`benanza.profiles.torch_candidates.Policy` take theirs from it; the C++ harness's
    ``Options`` defaults match). Units: ms, MB, s. ``cold``: :data:`COLD_POLICIES`; ``devices``:
    ``all`` or ``0,1,...`` (None: ``device``); ``workers_per_gpu``: suite processes per GPU, taking
    turns on it (three: the run stage of resnet50's quick start on an H100 was fastest with three).
    :meth:`check` validates every field (UsageError naming the option)."""

    warmup_ms: float = 0.25
    rse: float = 0.01
    min_samples: int = 10
    max_samples: int = 2000
    max_time_ms: float = 1000.0
    workspace_mb: float = 4096.0
    cold: str = "contenders"
    no_cold: bool = False
    exhaustive: bool = False
    workers_per_gpu: int = 3
    screen: float = 0.0
    max_engines: int = 0
    device: int = 0
    devices: str | None = None
    job_timeout: float = 300.0
    force: bool = False
    retry_failed: bool = False
    #: the harness's sample length (ms) and a cold measurement's time cap with racing on (ms)
    sample_ms: float = 0.25
    cold_max_time_ms: float = 200.0
    #: the prior (docs/timing.md, "Prior"): a database file, URL or ``self`` whose measurements of this
    #: GPU name rank each job's candidates (None: every candidate timed), and its contenders' margin
    #: (a fraction of the prior's best median: :data:`benanza.runner.prior.PRIOR_MARGIN`)
    prior: str | None = None
    prior_margin: float = 0.10

    def check(self) -> "Timing":
        """Itself, every field checked; raises UsageError naming the option of a bad one."""
        if self.cold not in COLD_POLICIES:
            raise UsageError(f"--cold must be one of {', '.join(COLD_POLICIES)}, got {self.cold!r}")
        if not 0 < self.rse < 1:
            raise UsageError(f"--rse must be in (0, 1), got {self.rse}")
        if self.min_samples < 1 or self.max_samples < self.min_samples:
            raise UsageError("--min-samples must be >= 1 and <= --max-samples")
        if self.job_timeout <= 0:
            raise UsageError("--job-timeout must be positive")
        if self.screen != 0 and self.screen < 1:
            raise UsageError(f"--screen must be 0 (off) or >= 1, got {self.screen}")
        if not 1 <= self.workers_per_gpu <= 8:
            raise UsageError(f"--workers-per-gpu must be 1 to 8, got {self.workers_per_gpu}")
        if self.max_engines < 0:
            raise UsageError(f"--max-engines must be 0 (all) or positive, got {self.max_engines}")
        if not 0 <= self.prior_margin < 10:
            raise UsageError(f"--prior-margin must be in [0, 10), got {self.prior_margin}")
        if self.prior is not None and self.exhaustive:
            raise UsageError("--prior with --exhaustive: the exhaustive run times every candidate")
        return self

    @property
    def cold_policy(self) -> str:
        """The cold policy run: none with ``no_cold``, all with ``exhaustive`` (unless named)."""
        return "none" if self.no_cold else ("all" if self.exhaustive and self.cold == "contenders" else self.cold)


#: the timing defaults
TIMING = Timing()

# ------------------------------------------------------------------------- devices, dims, batches

#: the largest dimension cuDNN and cuBLAS take (2^31 - 1)
MAX_DIM = 2**31 - 1
#: the most tokens ``benanza torch --seq``/``--kv-len`` take (2^20): beyond any model's context here;
#: a decode step's KV cache of that many tokens is already gigabytes per layer and sequence
MAX_TOKENS = 2**20


def parse_devices(text: str | None, device: int, count=None) -> tuple[int, ...]:
    """``--devices all`` (every GPU here: ``count()`` of them) or ``0,1,...``; none: ``(device,)``.
    Raises UsageError for another text, or ``all`` without a GPU."""
    if not text:
        return (device,)
    if text.strip().lower() == "all":
        n = count() if count is not None else 0
        if n < 1:
            raise UsageError("--devices all: no CUDA device here")
        return tuple(range(n))
    try:
        out = tuple(dict.fromkeys(int(p) for p in text.split(",") if p.strip()))
    except ValueError:
        raise UsageError(f"--devices {text!r}: expected 'all' or GPU indices like 0,1") from None
    if not out or min(out) < 0:
        raise UsageError(f"--devices {text!r}: expected 'all' or GPU indices like 0,1")
    return out


def parse_dims(dims) -> dict[str, int]:
    """``["seq=128", ...]`` (``--dim NAME=VALUE``, repeatable) -> ``{"seq": 128}``. Raises UsageError
    for a value that is not a positive integer or is above :data:`MAX_DIM`, an empty name, or a name
    given twice with two values. Whether the names are the model's symbolic dimensions, and the batch
    dimension's agreement with ``--batch``, is checked where the model is bound
    (:func:`benanza.processing.model.check_dims`)."""
    out: dict[str, int] = {}
    for d in dims or []:
        name, _, val = d.partition("=")
        name = name.strip()
        try:
            v = int(val)
        except ValueError:
            raise UsageError(f"--dim {d!r}: expected NAME=INTEGER") from None
        if not name or v <= 0:
            raise UsageError(f"--dim {d!r}: expected NAME=POSITIVE_INTEGER")
        if v > MAX_DIM:
            raise UsageError(f"--dim {name}={v}: above 2^31 - 1, the largest dimension cuDNN and cuBLAS take")
        if out.get(name, v) != v:
            raise UsageError(f"--dim {name} given twice ({out[name]} and {v})")
        out[name] = v
    return out


def batch_size(value) -> int:
    """A batch size: a positive integer (or its decimal text). Raises UsageError otherwise."""
    try:
        b = int(str(value).strip()) if not isinstance(value, (bool, float)) else None
    except ValueError:
        b = None
    if b is None or b <= 0:
        raise UsageError(f"--batch must be a positive integer, got {value!r}")
    return b


def parse_input_shape(text: str | None) -> tuple[int, ...] | None:
    """``--input-shape 3x299x299`` -> (3, 299, 299); None when not given; UsageError else."""
    if not text:
        return None
    try:
        return tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--input-shape {text!r}: give dims like 3x224x224") from None


def model_path(value) -> Path:
    """An existing file (the ONNX model). Raises UsageError naming the path when it is missing or not
    a file, in the words of :func:`benanza.processing.model.load_graph` (which reads it)."""
    p = Path(value)
    reason = missing_file_reason(p)
    if reason:
        raise UsageError(f"{p}: {reason}")
    return p

# ---------------------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Scenario:
    """What one LBL is of: ``model`` (an ONNX file) at ``batch`` in ``precision``, each layer
    allowed ``layouts`` (tensor layouts), ``cache`` (warm or cold measurements), measured on
    ``system`` (an id, fingerprint prefix or GPU name; None: this GPU if the database has it, else
    the latest), ``conv_precision`` (the convolutions in another precision: PyTorch's fp32 default
    runs them in tf32), ``dims`` (symbolic dimensions bound, ``((name, size), ...)``), ``batch_dim``
    (the input axis that is the batch) and ``phase`` (:class:`Phase`). Every field is validated when
    the value is made; raises UsageError for a bad one."""

    model: Path
    batch: int = 1
    precision: Precision = field(default_factory=lambda: Precision.of("fp32"))
    layouts: tuple[str, ...] = DEFAULT_LAYOUTS
    cache: str = "warm"
    system: str | None = None
    conv_precision: Precision | None = None
    dims: tuple[tuple[str, int], ...] = ()
    batch_dim: int | None = None
    phase: Phase = Phase()

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "model", model_path(self.model))
        set_(self, "batch", batch_size(self.batch))
        set_(self, "precision", precision(self.precision))
        set_(self, "layouts", layouts(self.layouts))
        set_(self, "cache", cache(self.cache))
        set_(self, "phase", Phase.of(self.phase))
        if self.conv_precision is not None:
            cp = precision(self.conv_precision)
            if cp.name != self.precision.name:
                conv_precision(cp.name == "tf32", [self.precision.name])
            set_(self, "conv_precision", None if cp.name == self.precision.name else cp)
        set_(self, "dims", tuple(sorted(dict(self.dims).items())))

    @classmethod
    def of(cls, model, batch=1, dtype="fp32", layout="nchw,nhwc", cache: str = "warm", system: str | None = None,
           conv_tf32: bool = False, dims: dict | None = None, batch_dim: int | None = None,
           phase="inference") -> "Scenario":
        """A scenario from the command line's words (``dtype="fp16"``, ``layout="nchw,nhwc"``)."""
        return cls(model, batch, dtype, layout, cache, system, "tf32" if conv_tf32 else None,
                   tuple((dims or {}).items()), batch_dim, phase)

    def label(self) -> str:
        """``resnet50.onnx batch 32 fp16 nchw+nhwc warm``."""
        p = self.precision.name + (f"+{self.conv_precision.name}conv" if self.conv_precision else "")
        return f"{self.model.name} batch {self.batch} {p} {'+'.join(x.lower() for x in self.layouts)} {self.cache}"


@dataclass(frozen=True)
class AnalyzeRequest:
    """``benanza analyze``: ``scenarios`` (one per batch and precision, in that order), the database
    ``db`` (a URL or path; None: the default), ``train`` (the training step too, with ``optimizer``),
    ``profile`` (a framework profile folder: the insights against it), ``allow_mismatch`` (a profile
    of another model file), ``trace`` (a file for the parallel LBL's schedule) and ``html`` (a file
    for the insights' HTML report)."""

    scenarios: tuple[Scenario, ...]
    db: str | None = None
    train: bool = False
    optimizer: str = DEFAULT_OPTIMIZER
    profile: Path | None = None
    allow_mismatch: bool = False
    trace: Path | None = None
    html: Path | None = None


@dataclass(frozen=True)
class PredictRequest:
    """``benanza predict``: the ``scenario`` measured (its ``system``: the origin) predicted on GPU
    ``target`` (a spec-table name) with ``memory`` (``l2`` or ``dram``); ``train``: its training
    step with ``optimizer``."""

    scenario: Scenario
    target: str
    db: str | None = None
    memory: str = "l2"
    train: bool = False
    optimizer: str = DEFAULT_OPTIMIZER


@dataclass(frozen=True)
class RooflineRequest:
    """``benanza roofline``: the ``scenario``'s layers against ``ceilings`` (``spec`` or
    ``measured``), as a ``kind`` of chart (``classic`` or ``time``) written to ``png``/``svg``."""

    scenario: Scenario
    db: str | None = None
    ceilings: str = "spec"
    kind: str = "classic"
    png: Path | None = None
    svg: Path | None = None

    def __post_init__(self):
        if self.kind not in ("classic", "time"):
            raise UsageError(f"--kind must be classic or time, got {self.kind!r}")
        if self.ceilings not in ("spec", "measured"):
            raise UsageError(f"--ceilings must be spec or measured, got {self.ceilings!r}")


@dataclass(frozen=True)
class BenchRequest:
    """``benanza bench``: ``models`` (paths; several: a zoo) at ``batches`` in ``precisions`` and
    ``layouts``, timed with ``timing`` into ``db``; ``output`` (the suite folder; None: a cache
    folder), ``kinds`` (only these layer kinds), ``torch`` (the framework's kernels: None when
    available), ``conv_tf32``, ``dims``, ``batch_dim``, ``train`` with ``optimizer``, ``cluster`` (a
    Dask scheduler's address or ``local``) on ``gpu_kinds``."""

    models: tuple[Path, ...]
    batches: tuple[int, ...] = (1,)
    precisions: tuple[str, ...] = ("fp32",)
    layouts: tuple[str, ...] = DEFAULT_LAYOUTS
    timing: Timing = TIMING
    db: str | None = None
    output: Path | None = None
    kinds: tuple[str, ...] | None = None
    torch: bool | None = None
    conv_tf32: bool = False
    dims: tuple[tuple[str, int], ...] = ()
    batch_dim: int | None = None
    train: bool = False
    optimizer: str = DEFAULT_OPTIMIZER
    cluster: str | None = None
    gpu_kinds: tuple[str, ...] | None = None
    quiet: bool = False


@dataclass(frozen=True)
class RunRequest:
    """``benanza run``: the built suite in ``folder`` timed with ``timing`` into ``db``; ``torch``: the
    framework's kernels (None: when available); ``cluster`` (a Dask scheduler's address or ``local``)
    on ``gpu_kinds``; ``quiet``: no bars."""

    folder: Path
    timing: Timing = TIMING
    db: str | None = None
    torch: bool | None = None
    cluster: str | None = None
    gpu_kinds: tuple[str, ...] | None = None
    quiet: bool = False


@dataclass(frozen=True)
class TorchRequest:
    """``benanza torch``: the module ``spec`` (:func:`benanza.processing.modules.resolve`) at
    ``batches`` in framework ``dtype`` (:data:`FRAMEWORK_DTYPES`), into working folder ``output``
    (None: ``./benanza-torch-NAME``); ``bench``: bench the layers first (in this process, with
    ``timing``); the profiles' ``device``, ``channels_last``, ``compile`` mode, ``warmup``, ``runs``,
    ``iterations`` and ``logs``; ``seq``, ``input_shape``, ``phase`` (:class:`Phase`) and ``kv_len``
    of the module's inputs (``seq`` and ``kv_len``: 1 to :data:`MAX_TOKENS`; a model's own
    ``max_position_embeddings`` is checked where its configuration is read,
    :func:`benanza.processing.modules.resolve`); ``force``: export again; ``optimizer`` of a training
    phase; ``mla``: the form of an MLA decoder's decode step (:data:`MLA_FORMS`; ``absorbed`` only with
    ``--phase decode``). Raises UsageError for a bad field."""

    spec: str
    batches: tuple[int, ...] = (1,)
    dtype: str = "fp32"
    db: str | None = None
    output: Path | None = None
    device: str = "cuda"
    channels_last: bool = False
    compile: str | None = None
    bench: bool = True
    timing: Timing = TIMING
    seq: int = 128
    phase: Phase = Phase()
    kv_len: int | None = None
    input_shape: tuple[int, ...] | None = None
    warmup: int = 20
    runs: int = 100
    iterations: int = 5
    logs: bool = True
    force: bool = False
    optimizer: str = DEFAULT_OPTIMIZER
    mla: str = "transformers"

    def __post_init__(self):
        framework_dtype(self.dtype, "torch")
        if self.mla not in MLA_FORMS:
            raise UsageError(f"--mla {self.mla!r}: choose {' or '.join(MLA_FORMS)}")
        if self.mla != "transformers" and self.phase.decoder != "decode":
            raise UsageError(f"--mla {self.mla}: only with --phase decode (serving engines absorb the weights in "
                             f"decode; prefill expands the latent)")
        for flag, n in (("--seq", self.seq), ("--kv-len", self.kv_len)):
            if n is not None and not 1 <= n <= MAX_TOKENS:
                raise UsageError(f"{flag} {n}: give a length of 1 to {MAX_TOKENS} tokens")
        if self.compile is not None and self.compile not in ("default", "reduce-overhead", "max-autotune"):
            raise UsageError(f"--compile {self.compile!r}: choose default, reduce-overhead or max-autotune")
        if self.kv_len is not None and self.phase.decoder != "decode":
            raise UsageError("--kv-len: only with --phase decode")
