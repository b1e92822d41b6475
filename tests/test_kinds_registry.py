"""The layer kinds' registry (benanza.kinds.REGISTRY) is whole: every kind has every piece the stages
read (config, example, template, case, FLOPs, minimum bytes, PyTorch candidate, ONNX mappers, ATen ops,
NHWC support, stable keys, fusion patterns), and the checker below reports each piece a kind lacks
(issue 16; issue 52: adding a kind is its module, its template, its test and its example's key here, and
this test says when a piece is missing; a kind registers itself by its module's KIND).
The C++ precision enum is rendered from benanza.kinds.precision.TABLE."""
from __future__ import annotations

import dataclasses
import functools
import re

import jinja2
import onnx.defs
import pytest

from benanza import __version__
from benanza import kinds as L
from benanza.generation.generator import jinja_env, job_id, templates_dir
from benanza.kinds import precision
from benanza.kinds.base import Job, Kind, LayerConfig, numel
from benanza.kinds.cpp import Case, cpp_string
from benanza.kinds.framework import Ctx
from benanza.kinds.onnx_map import ContribOp
from benanza.kinds.patterns import Pattern
from conftest import REPO

#: the key of each kind's example config, as databases store it: a change here orphans every stored
#: measurement of the kind (the key hashes the canonical parameters; benanza.kinds.base.LayerConfig.key)
EXAMPLE_KEYS = {
    "Conv": "conv-8ead0124416d9fbf", "GroupedGemm": "groupedgemm-a7a856c17c3c9f44", "ConvBiasAct": "convbiasact-982bffd98c0e77ea",
    "ConvBnAct": "convbnact-7a1704b75b24d0b7", "Activation": "activation-ddf4d221a3e27072",
    "BatchNorm": "batchnorm-c922ac0cf2fa3ae5", "Pooling": "pooling-25948dfece64a193",
    "Softmax": "softmax-fa478a2e62860449", "Elementwise": "elementwise-44839d73978a612d",
    "Gemm": "gemm-7063ae47f25132ef", "LRN": "lrn-91ef459b5a92e6f6", "Dropout": "dropout-9e92dc18ca40b242",
    "Reduce": "reduce-776395d2f85f8dd5", "Copy": "copy-1d7e2037582333af", "RNN": "rnn-84728de8376073c4",
    "LayerNorm": "layernorm-3ce21e7fb33e88af", "Unary": "unary-810696df17c0df4e",
    "Gather": "gather-75a7da5f284937a8", "Where": "where-daa2176cb52aab36", "SDPA": "sdpa-7d3de339f70f9f16",
    "GemmAct": "gemmact-cd81367ec74fff60",
    "InstanceNorm": "instancenorm-8c1ff0669724a5ff",
    "ConvBwdData": "convbwddata-af6d76bd16bdb532", "ConvBwdFilter": "convbwdfilter-cce2307ead3bcd6c",
    "Optimizer": "optimizer-64109369cda75f9f",
    "GemmActBackward": "gemmactbackward-26947f6507aa3c3e",
    "ActivationBwd": "activationbwd-7d3b097983260ce7", "PoolingBwd": "poolingbwd-eefee1210435cbf4",
    "SoftmaxBwd": "softmaxbwd-ee443acea3cbdc64",
    "BatchNormTrain": "batchnormtrain-7c4843fdd3f0e765", "BatchNormBwd": "batchnormbwd-d655a2c6817e6125",
    "RNNTrain": "rnntrain-149f45aa0d0b3fc9",
    "DropoutBwd": "dropoutbwd-625b71f4d6dd0faa",
    "GatherBwd": "gatherbwd-930c8240260476a0", "CrossEntropyLoss": "crossentropyloss-6637b50daa609c46",
    "LayerNormBwd": "layernormbwd-3920d73e46c66618", "UnaryBwd": "unarybwd-b5b7345dba3f5c19",
    "SdpaBwd": "sdpabwd-d7ba44ee4308baac",
    "RMSNorm": "rmsnorm-33b45f963793fb38",
    "RMSNormBwd": "rmsnormbwd-0a4a9d679161d31f",
    "Trilu": "trilu-67678524e83fd102",
    "CumSum": "cumsum-e908677e32e7cd17",
    "TopK": "topk-21c7c27461194f58", "NonZero": "nonzero-b6d3cf6362b12575",
    "Scatter": "scatter-58d22b157ad1911f", "GatherElements": "gatherelements-63f0d0b10ec53a2d",
    "Resize": "resize-5908b28b25905218",
    "RotaryEmbedding": "rotaryembedding-a7fc2031e618edc1",
    "LRNBwd": "lrnbwd-e6afa6980affddb3",
    "ResizeBwd": "resizebwd-095964f333c00a25",
    "SwiGLUBwd": "swiglubwd-b254227df2d8b825",
}


# ----------------------------------------------------------------------------- the C++ side

@functools.cache
def _template_source(name: str) -> str:
    return (templates_dir() / name).read_text()


def _struct_fields(source: str, struct: str) -> list[str]:
    """The field names of C++ ``struct NAME { ... };`` in ``source``, in declaration order."""
    m = re.search(r"^struct " + re.escape(struct) + r" \{\n(.*?)^\};", source, re.S | re.M)
    if not m:
        raise LookupError(f"no struct {struct}")
    body = re.sub(r"//[^\n]*", "", m.group(1))
    names = []
    for decl in body.split(";"):
        decl = re.sub(r"<[^<>]*>", "", decl.strip())  # template arguments hold no declarators
        if not decl:
            continue
        for i, part in enumerate(decl.split(",")):
            words = re.sub(r"\[[^\]]*\]", "", part).split()
            names.append(words[-1] if i == 0 else words[0])
    return names


def _rows(text: str) -> list[int]:
    """The number of top-level initializers of each row of the rendered ``kCases`` table (string
    literals and nested braces skipped)."""
    start = text.index("kCases[] = {") + len("kCases[] = {")
    depth, counts, i = 1, [], start
    while depth:
        ch = text[i]
        if ch == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == "{":
            depth += 1
            if depth == 2:
                counts.append(1)
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 2:
            counts[-1] += 1
        i += 1
    return counts


# ----------------------------------------------------------------------------- the PyTorch side

class _Recorder:
    """Stands in for torch (and a tensor) when PyTorch is not installed: a candidate builder only
    allocates inputs and closes over the call, so building it needs no real tensors (nothing runs)."""

    def __getattr__(self, name):
        return _Recorder()

    def __call__(self, *a, **k):
        return _Recorder()

    def __getitem__(self, k):
        return _Recorder()

    def __iter__(self):
        return iter(())

    def __int__(self):
        return 1

    __index__ = __int__

    def __float__(self):
        return 1.0

    def _op(self, *a):
        return _Recorder()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _op
    __pow__ = __neg__ = __lt__ = __gt__ = __le__ = __ge__ = _op


def _candidate(kind: Kind):
    """The kind's PyTorch candidate for its example (fp32, NCHW): with torch, built and run on the CPU
    (returns the call and the element count it wrote), else built against :class:`_Recorder`."""
    try:
        import torch
    except ImportError:
        cand = kind.torch(Ctx(kind.example, _Recorder(), _Recorder(), _Recorder(), False))
        return cand, cand.out_numel
    ctx = Ctx(kind.example, torch, torch.device("cpu"), torch.float32, False)
    with torch.inference_mode():
        cand = kind.torch(ctx)
        out = cand.fn()
    return cand, out.numel() if isinstance(out, torch.Tensor) else -1


# ----------------------------------------------------------------------------- the checker

def _check_config(kind: Kind) -> list[str]:
    out = []
    if not (isinstance(kind.config, type) and issubclass(kind.config, LayerConfig)):
        return [f"config: {kind.config!r} is not a LayerConfig class"]
    if kind.config.kind != kind.name:
        out.append(f"config: {kind.config.__name__}.kind is {kind.config.kind!r}, not {kind.name!r}")
    if not dataclasses.is_dataclass(kind.config) or not kind.config.__dataclass_params__.frozen:
        out.append(f"config: {kind.config.__name__} is not a frozen dataclass")
    if type(kind.example) is not kind.config:
        out.append(f"example: {kind.example!r} is not a {kind.config.__name__}")
    return out


def _check_example(kind: Kind) -> list[str]:
    """FLOPs, minimum bytes, the key's stability and the PyTorch candidate of the example."""
    cfg, out = kind.example, []
    flops = cfg.flops()
    if not isinstance(flops, int) or flops < 0:
        out.append(f"flops: {flops!r} is not a count")
    try:
        b4, b2 = kind.min_bytes(cfg, 4, 4), kind.min_bytes(cfg, 2, 2)
        # 2-byte data moves no more than 4-byte data; every output element is written (>= 1 byte)
        if not (isinstance(b4, int) and 0 < b2 <= b4 and b4 >= numel(cfg.output_shape())):
            out.append(f"min_bytes: {b2!r} at 2 bytes/element, {b4!r} at 4 (the output alone is {numel(cfg.output_shape())})")
    except Exception as e:  # noqa: BLE001 (the report names any failure)
        out.append(f"min_bytes: {type(e).__name__}: {e}")
    try:
        again = L.config_from_params(kind.name, cfg.params())
    except (KeyError, TypeError, ValueError) as e:
        again = e
    if cfg.key != EXAMPLE_KEYS.get(kind.name) or getattr(again, "key", None) != cfg.key:
        out.append(f"key: the example's key {cfg.key} is not the stored {EXAMPLE_KEYS.get(kind.name)} "
                   f"(or its stored parameters do not rebuild it: {again!r})")
    try:
        cand, wrote = _candidate(kind)
        if not cand.call.startswith("torch:aten::") or cand.out_numel != numel(cfg.output_shape()) or \
                wrote != cand.out_numel:
            out.append(f"torch: {cand.call} writes {wrote} of {numel(cfg.output_shape())} elements")
    except Exception as e:  # noqa: BLE001
        out.append(f"torch: {type(e).__name__}: {e}")
    return out


def _check_template(kind: Kind) -> list[str]:
    """The template exists, names its case struct, renders the example's case with one row per case
    of the struct's arity, and the case dataclass lists the struct's fields in order."""
    if not (templates_dir() / str(kind.template)).is_file():
        return [f"template: {kind.template} not under templates/"]
    src = _template_source(kind.template)
    m = re.search(r'm\.case_table\("(\w+)"', src)
    if not m:
        return [f"template: {kind.template} has no case table (macros.case_table)"]
    out, struct = [], m.group(1)
    fields = _struct_fields(src, struct)
    jobs = [Job(id=job_id(kind.example, p), config=kind.example, precision=p, node='n"' + kind.name, layout="NCHW")
            for p in ("fp32", "fp16")]
    try:
        cases = [kind.case(kind.example, j) for j in jobs]
    except Exception as e:  # noqa: BLE001
        return [f"case: {type(e).__name__}: {e}"]
    if not isinstance(cases[0], Case) or not dataclasses.is_dataclass(cases[0]):
        return [f"case: {type(cases[0]).__name__} is not a benanza.kinds.cpp.Case"]
    if cases[0].fields() != fields:
        out.append(f"case fields: {type(cases[0]).__name__} has {cases[0].fields()}, struct {struct} has {fields}")
    try:
        text = jinja_env().get_template(kind.template).render(cases=cases, version=__version__)
    except jinja2.TemplateError as e:
        return out + [f"template: {kind.template} does not render: {e}"]
    if _rows(text) != [len(fields)] * len(cases) or any(cpp_string(j.node) not in text for j in jobs):
        out.append(f"template: {kind.template} renders rows of {_rows(text)} initializers for {len(fields)} fields")
    if ("c.job.layout" in src) != kind.nhwc:
        out.append(f"nhwc: the kind says nhwc={kind.nhwc}, {kind.template} "
                   f"{'reads' if 'c.job.layout' in src else 'ignores'} the job's layout")
    return out


#: configs of a kind that only a fusion candidate makes (no ONNX op maps them), whose backward calls
#: are another kind's: SwiGLU's gate (Elementwise swiglu, a Sigmoid -> Mul -> Mul) -> SwiGLUBwd
FUSION_EXAMPLES = {"Elementwise": (L.ElementwiseConfig(op="swiglu", a=(1, 128, 11008), b=(1, 128, 11008)),)}


def _backward_of(kind: Kind) -> list[str]:
    """The registered kinds whose ``backward`` makes a config of ``kind`` for their example (or one of
    their :data:`FUSION_EXAMPLES`)."""
    return [name for name, k in L.REGISTRY.items() if k.backward and k is not kind
            and any(type(cfg) is kind.config for ex in (k.example, *FUSION_EXAMPLES.get(name, ()))
                    for _, cfg in k.backward(ex))]


def _check_backward(kind: Kind) -> list[str]:
    """The kind's backward calls for its example: each a (phase, config) of a backward phase of
    :data:`benanza.kinds.TRAINING_PHASES` or ``forward`` (the layer's training-mode forward), the config
    of a registered kind (the wiring plans jobs of it)."""
    if kind.backward is None:
        return []
    try:
        calls = tuple(kind.backward(kind.example))
    except Exception as e:  # noqa: BLE001
        return [f"backward: {type(e).__name__}: {e}"]
    out = []
    for call in calls:
        phase, cfg = call if isinstance(call, tuple) and len(call) == 2 else (None, call)
        if phase not in L.TRAINING_PHASES[:3] or L.REGISTRY.get(getattr(cfg, "kind", None)) is None or \
                type(cfg) is not L.REGISTRY[cfg.kind].config:
            out.append(f"backward: {call!r} is not a (backward phase, config of a registered kind)")
    return out


def _check_onnx(kind: Kind) -> list[str]:
    out = []
    if kind.phase != "forward":  # a training step's own call (the optimizer): no ONNX op is it
        if kind.onnx or kind.fused_from:
            out.append(f"onnx: a kind of the {kind.phase} phase maps ONNX ops or fusions")
        if not kind.aten or not all(a.startswith("aten::") for ops in kind.aten.values() for a in ops):
            out.append("aten: no ATen op names for the step (the profile join would leave its kernels unattributed)")
        return out
    if not kind.onnx and not kind.contrib and not kind.fused_from and not kind.backward_of and not _backward_of(kind):
        out.append("onnx: the kind maps no ONNX op, measures no fusion and is no kind's backward call")
    for name, fn in kind.backward_of.items():
        if name not in L.REGISTRY or L.REGISTRY[name].backward is not fn:
            out.append(f"onnx: the kind is the backward call of {name!r}, whose backward is not the kind's")
    for op, mapper in kind.onnx.items():
        if not onnx.defs.has(op) or not callable(mapper):
            out.append(f"onnx: {op} is not an ONNX op with a callable mapper ({mapper!r})")
        aten = kind.aten.get(op)
        if not aten or not all(isinstance(a, str) and a.startswith("aten::") for a in aten):
            out.append(f"aten: no ATen op names for {op} (the profile join would leave its kernels unattributed)")
    out += _check_contrib(kind)
    for op in set(kind.typed_ops) - set(kind.onnx):
        out.append(f"onnx: typed op {op} is not mapped")
    for op in kind.fused_from:
        if not onnx.defs.has(op):
            out.append(f"onnx: fused op {op} is not an ONNX op")
    return out


def _check_contrib(kind: Kind) -> list[str]:
    """Each operator onnx does not define (``Kind.contrib``): keyed by (domain, op), a ContribOp with a
    callable mapper and shape rule, its spec in ONNX Runtime's sources or contrib operator docs
    (docs/ContribOperators.md), and ATen names; a default-domain one is no onnx op (onnx's own comes first)."""
    out = []
    for key, c in kind.contrib.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            out.append(f"contrib: {key!r} is not a (domain, op type) pair")
            continue
        domain, op = key
        if domain in ("", "ai.onnx") and onnx.defs.has(op) or domain == "ai.onnx":
            out.append(f"contrib: {op} is an ONNX op (map it in onnx)")
        if not isinstance(c, ContribOp) or not callable(c.mapper) or not callable(c.shapes):
            out.append(f"contrib: {domain}.{op} has no ContribOp with a callable mapper and shape rule ({c!r})")
            continue
        if domain == "benanza":  # benanza's export of a PyTorch op ONNX lacks: the op's PyTorch page
            if not c.spec.startswith("https://docs.pytorch.org/docs/"):
                out.append(f"contrib: {domain}.{op} cites no PyTorch doc of the op it exports ({c.spec!r})")
        elif not c.spec.startswith("https://github.com/microsoft/onnxruntime/") or \
                (domain == "com.microsoft" and not c.spec.endswith(f"ContribOperators.md#com.microsoft.{op}")):
            out.append(f"contrib: {domain}.{op} cites no spec in ONNX Runtime ({c.spec!r})")
        # ATen ops, or a library's own custom op as the profiler names it (transformers::grouped_mm_fallback)
        if not c.aten or not all(isinstance(a, str) and "::" in a for a in c.aten) or \
                not any(a.startswith("aten::") for a in c.aten):
            out.append(f"aten: no ATen op names for {domain}.{op} (the profile join would leave its kernels unattributed)")
    return out


def _check_patterns(kind: Kind) -> list[str]:
    """Each fusion pattern (``Kind.patterns``): a benanza.kinds.patterns.Pattern with a callable ``find``,
    an ``extend`` callable or None, and an (int, int) order."""
    out = []
    for p in kind.patterns:
        if not isinstance(p, Pattern) or not callable(p.find) or not (p.extend is None or callable(p.extend)) \
                or not (isinstance(p.order, tuple) and len(p.order) == 2 and all(type(i) is int for i in p.order)):
            out.append(f"patterns: {p!r} is no Pattern with a callable find and an (int, int) order")
    return out


def problems(kind: Kind) -> list[str]:
    """Every piece ``kind`` lacks, one line each (``piece: why``); empty when it is whole."""
    out = _check_config(kind)
    if out:
        return out
    return out + _check_example(kind) + _check_template(kind) + _check_onnx(kind) + _check_backward(kind) \
        + _check_patterns(kind)


# ----------------------------------------------------------------------------- the tests

def test_every_registered_kind_is_whole():
    assert {n: problems(k) for n, k in L.REGISTRY.items() if problems(k)} == {}
    assert all(n == k.name for n, k in L.REGISTRY.items())
    assert set(EXAMPLE_KEYS) == set(L.REGISTRY), "a kind without a stored example key (add it to EXAMPLE_KEYS)"


def test_each_onnx_op_has_one_kind():
    """model.py builds one op -> mapper table from the registry: two kinds mapping an op would shadow one."""
    seen: dict[str, str] = {}
    for name, kind in L.REGISTRY.items():
        for op in kind.onnx:
            assert op not in seen, f"{op} is mapped by {seen[op]} and {name}"
            seen[op] = name
        for key in kind.contrib:
            assert key not in seen, f"{key} is mapped by {seen[key]} and {name}"
            seen[key] = name


class _Swapped:
    """A case builder whose case lists its first two C++ fields in the wrong order."""

    def __init__(self, build):
        self.build = build

    def __call__(self, cfg, job):
        case = self.build(cfg, job)
        names = case.fields()
        order = [names[0], names[2], names[1]] + names[3:]
        cls = dataclasses.make_dataclass("Swapped", [(n, object) for n in order[1:]], bases=(Case,), frozen=True)
        return cls(**{n: getattr(case, n) for n in order})


def _field_added(kind: Kind, metadata=None) -> Kind:
    """The kind with a field added to its config (as a later change might add a parameter)."""
    extra = dataclasses.field(default=0, metadata=metadata or {})
    cls = dataclasses.make_dataclass(kind.config.__name__, [("added", int, extra)], bases=(kind.config,), frozen=True)
    example = cls(**{f.name: getattr(kind.example, f.name) for f in dataclasses.fields(kind.example)})
    return dataclasses.replace(kind, config=cls, example=example)


#: piece -> how to take it from a kind (a dataclasses.replace of the entry) and the report's prefix
REMOVALS = {
    "config": (lambda k: dataclasses.replace(k, config=LayerConfig), "config:"),
    "example": (lambda k: dataclasses.replace(k, example=None), "example:"),
    "template": (lambda k: dataclasses.replace(k, template="missing.cpp.j2"), "template:"),
    "case": (lambda k: dataclasses.replace(k, case=None), "case:"),
    "case order": (lambda k: dataclasses.replace(k, case=_Swapped(k.case)), "case fields:"),
    "min_bytes": (lambda k: dataclasses.replace(k, min_bytes=None), "min_bytes:"),
    "torch": (lambda k: dataclasses.replace(k, torch=None), "torch:"),
    "onnx": (lambda k: dataclasses.replace(k, onnx={}, contrib={}, fused_from=(), backward_of={}), "onnx:"),
    "contrib spec": (lambda k: dataclasses.replace(k, contrib={key: dataclasses.replace(c, spec="my notes")
                                                              for key, c in k.contrib.items()}), "contrib:"),
    "contrib shapes": (lambda k: dataclasses.replace(k, contrib={key: dataclasses.replace(c, shapes=None)
                                                                for key, c in k.contrib.items()}), "contrib:"),
    "contrib aten": (lambda k: dataclasses.replace(k, contrib={key: dataclasses.replace(c, aten=())
                                                              for key, c in k.contrib.items()}), "aten:"),
    "onnx mapper": (lambda k: dataclasses.replace(k, onnx={op: None for op in k.onnx}), "onnx:"),
    "aten": (lambda k: dataclasses.replace(k, aten={}), "aten:"),
    "nhwc": (lambda k: dataclasses.replace(k, nhwc=not k.nhwc), "nhwc:"),
    "key": (_field_added, "key:"),
    "backward": (lambda k: dataclasses.replace(k, backward=lambda cfg: (("backward_data", cfg.key),)), "backward:"),
    "pattern": (lambda k: dataclasses.replace(k, patterns=tuple(dataclasses.replace(p, find=None) for p in k.patterns)),
                "patterns:"),
}


#: every (kind, piece) pair; a kind only fusion makes maps no ONNX op, so it has no mapper or ATen name to remove;
#: a kind of another training phase (the optimizer) maps none and must not (its "onnx" piece is to add one)


def test_a_training_phase_kind_that_maps_an_onnx_op_is_reported():
    for kind in L.REGISTRY.values():
        if kind.phase != "forward":
            found = problems(dataclasses.replace(kind, onnx={"Relu": lambda n, c, a: None}))
            assert any(p.startswith("onnx:") for p in found), found
#: every (kind, piece) pair; a kind only fusion makes maps no ONNX op, so it has no mapper or ATen name to
#: remove; a kind only another kind's backward makes has no ONNX op or fusion to remove (the backward
#: test below takes its maker's backward away instead); a backward is only checked where a kind has one
#: (kind, piece) pairs the checker must report when the piece is removed: a training-phase kind
#: (the optimizer) has no ONNX op to remove; a kind that another kind's backward makes (a GEMM's
#: gradients are GEMMs) stays whole without its ONNX ops
PAIRS = [(name, piece) for name, kind in L.REGISTRY.items() for piece in REMOVALS
         if (kind.onnx or piece not in ("onnx mapper", "aten") if kind.phase == "forward"
             else piece not in ("onnx", "onnx mapper"))
         and (kind.onnx or kind.fused_from or piece != "onnx") and (kind.backward or piece != "backward")
         and (kind.contrib or not piece.startswith("contrib")) and (kind.patterns or piece != "pattern")
         and not (piece == "onnx" and any(type(cfg) is kind.config for k in L.REGISTRY.values() if k.backward
                                          for _, cfg in k.backward(k.example)))]


def test_a_backward_kind_no_kind_makes_is_reported(monkeypatch):
    """A kind with no ONNX op, no contrib op and no fusion is whole only while a registered kind's backward
    makes it."""
    for name in [n for n, k in L.REGISTRY.items()
                 if not k.onnx and not k.contrib and not k.fused_from and k.phase == "forward"]:
        kind = L.REGISTRY[name]
        assert _backward_of(kind), name
        with monkeypatch.context() as mp:
            for maker in _backward_of(kind):
                mp.setitem(L.REGISTRY, maker, dataclasses.replace(L.REGISTRY[maker], backward=None))
            assert any(p.startswith("onnx:") for p in problems(kind)), name


@pytest.mark.parametrize("name,piece", PAIRS)
def test_the_checker_reports_a_missing_piece(name, piece):
    kind = L.REGISTRY[name]
    remove, prefix = REMOVALS[piece]
    found = problems(remove(kind))
    assert any(p.startswith(prefix) for p in found), found


def test_an_optional_field_keeps_every_key():
    """A parameter added with metadata=OPTIONAL (benanza.kinds.base) leaves the keys as they were."""
    for kind in L.REGISTRY.values():
        assert _field_added(kind, L.OPTIONAL).example.key == kind.example.key


def test_the_struct_parser_reads_declarators_in_order():
    src = ("struct XCase {\n  JobInfo job;\n  int pad[3], stride[3];  // a, b\n  std::vector<std::size_t> inputs;\n"
           "  double a_lo, a_hi;\n  const char* note;\n};\n")
    assert _struct_fields(src, "XCase") == ["job", "pad", "stride", "inputs", "a_lo", "a_hi", "note"]
    assert _rows('kCases[] = {\n  {{"a,}", "b"}, {1, 2}, 3},\n  {{"\\"{"}, {}, 4},\n};') == [3, 3]


def test_the_precision_header_is_rendered_from_the_table():
    """cpp/include/benanza/precision.hpp is benanza.kinds.precision.cpp_header() (regenerate it with
    ``python -m benanza.kinds.precision > cpp/include/benanza/precision.hpp``), and every precision's
    enumerator the suites write is in it."""
    header = (REPO / "cpp" / "include" / "benanza" / "precision.hpp").read_text()
    assert header == precision.cpp_header()
    for p in precision.TABLE.values():
        assert f"case Precision::{p.cpp}: return \"{p.name}\";" in header
        assert precision.PRECISION_ENUM[p.name] == f"Precision::{p.cpp}"


# ----------------------------------------------------------------------------- adding a kind, and its patterns

#: the fusion patterns in the order processing runs them (benanza.kinds.patterns documents it): (order, the
#: module of the kind that declares it). The order is part of every model's fusion candidates: a change
#: here is a change of results, and a new fused kind adds its line
PATTERN_ORDER = [
    ((10, 0), "conv_bn_act"), ((10, 1), "conv_bias_act"), ((20, 0), "sdpa"), ((30, 0), "sdpa"),
    ((40, 0), "layernorm"), ((50, 0), "rmsnorm"), ((60, 0), "rotary"), ((65, 0), "grouped_gemm"), ((70, 0), "gemm_act"), ((80, 0), "unary"),
    ((90, 0), "unary"), ((100, 0), "elementwise"), ((110, 0), "gemm"), ((120, 0), "activation"),
    ((130, 0), "layernorm"), ((130, 1), "rmsnorm"),
]


def test_the_patterns_run_in_their_documented_order():
    """Each pattern is declared by the kind whose config it makes, in the order pinned above; two
    patterns never share a place (benanza.kinds.patterns.passes refuses them)."""
    got = [(p.order, p.find.__module__.rsplit(".", 1)[-1]) for p in L.PATTERNS]
    assert got == PATTERN_ORDER
    owners = {p.order: name for name, k in L.REGISTRY.items() for p in k.patterns}
    assert owners[(20, 0)] == "SDPA" and owners[(100, 0)] == "Elementwise" and owners[(130, 1)] == "RMSNorm"
    from benanza.kinds.patterns import passes
    assert [tuple(p.order for p in ps) for ps in passes(L.PATTERNS)][:2] == [((10, 0), (10, 1)), ((20, 0),)]
    with pytest.raises(ValueError, match="share the order"):
        passes(L.PATTERNS + (dataclasses.replace(L.PATTERNS[3], name="again"),))


def _model_names(path) -> set[str]:
    """The names that ``path`` (a Python file) reads: Name ids and Attribute names, at any depth."""
    import ast
    tree = ast.parse(path.read_text())
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def test_processing_names_no_fused_kind():
    """processing/model.py runs the kinds' patterns (benanza.kinds.PATTERNS) and holds none: no function
    that finds a pattern, no name of a config class any pattern makes or any fused kind measures (the
    matchers live with their kinds)."""
    import ast
    path = REPO / "benanza" / "processing" / "model.py"
    tree = ast.parse(path.read_text())
    functions = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert not [f for f in functions if f.lstrip("_").startswith("find") or f == "_Pattern"], functions
    fused = {k.config.__name__ for k in L.REGISTRY.values() if k.patterns or k.fused_from}
    assert len(fused) >= 10  # ConvBiasActConfig ... RMSNormConfig: the check has something to find
    assert not fused & _model_names(path)
    assert len(path.read_text().splitlines()) < 800


#: a kind as a contributor writes it, one module: ONNX LpNormalization (p = 2: y = x / ||x||_2 along an
#: axis), and the Relu before it fused into the same pass (a pattern of its own)
NEW_KIND = '''"""LpNorm layers: ONNX LpNormalization, y = x / ||x||_p along ``axis``; a Relu before it fused in."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, functional
from benanza.kinds.onnx_map import Unsupported, need
from benanza.kinds.patterns import Graph, Node, Pattern, is_kind


@dataclass(frozen=True)
class LpNormConfig(LayerConfig):
    kind: ClassVar[str] = "LpNorm"
    x: Shape
    axis: int
    p: int = 2
    relu: bool = False

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.x


def _map(node, ctx, attrs):
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    axis = int(attrs.get("axis", -1)) % len(x)
    if int(attrs.get("p", 2)) != 2:
        raise Unsupported("p other than 2")
    return LpNormConfig(x=x, axis=axis)


@dataclass(frozen=True)
class LpNormCase(Case):
    n: CppValue
    axis: CppValue
    relu: CppValue


def _case(cfg, job: Job) -> LpNormCase:
    return LpNormCase(job=job_init(job), n=numel(cfg.x), axis=cfg.axis, relu=cpp_num(cfg.relu))


def _torch(c: Ctx) -> Candidate:
    x, F = c.randn(c.cfg.x), functional(c)
    return Candidate("torch:aten::linalg_vector_norm+div", "default", lambda: F.normalize(x, 2.0, c.cfg.axis),
                     numel(c.cfg.x))


def find_relu_lpnorm(g: Graph, ly: Node):
    """A Relu read only by an LpNorm layer: one pass."""
    if not is_kind(ly, "LpNorm") or ly.config.relu or not g.free(ly):
        return None
    relu = g.made_by(ly.inputs[0])
    if not g.free(relu) or not is_kind(relu, "Activation") or relu.config.mode != "relu" or g.sole_user(relu) is not ly:
        return None
    return [relu.index, ly.index], dataclasses.replace(ly.config, relu=True)


KIND = Kind(
    example=LpNormConfig(x=(2, 16), axis=1), name="LpNorm", config=LpNormConfig, template="lpnorm.cpp.j2",
    case=_case, min_bytes=io_bytes, torch=_torch, onnx={"LpNormalization": _map},
    aten={"LpNormalization": ("aten::linalg_vector_norm", "aten::div")},
    patterns=(Pattern("Relu -> LpNormalization", (140, 0), find_relu_lpnorm),))
'''

NEW_TEMPLATE = '''// Generated by benanza {{ version }}: LpNorm (a kind added by tests/test_kinds_registry.py).
{% import "macros.cpp.j2" as m %}
#include "benanza/harness.hpp"

namespace {
using namespace benanza;

struct LpNormCase {
  JobInfo job;
  long long n;
  int axis;
  bool relu;
};

{{ m.case_table("LpNormCase", cases) }}

void run(Bench& b, const LpNormCase& c) { (void)b; (void)c; }

{{ m.register_cases("LpNormCase") }}

}  // namespace
'''

#: run in a copy of the package with the new kind's two files: the registry, the checker, a model, a suite
NEW_KIND_RUN = '''
import json, sys
from pathlib import Path
import onnx
from onnx import TensorProto, helper
import benanza
from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.processing.model import process
sys.path.insert(0, sys.argv[2])
from test_kinds_registry import problems

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 64])
nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("LpNormalization", ["r"], ["y"], name="norm", axis=1, p=2),
         helper.make_node("LpNormalization", ["x"], ["z"], name="alone", axis=1, p=2)]
path = Path(sys.argv[1]) / "lp.onnx"
onnx.save(helper.make_model(helper.make_graph(nodes, "lp", [x], [y, z]), opset_imports=[helper.make_opsetid("", 17)]), path)
ml = process(path, 4)
suite = generate([ml], ["fp32"], Path(sys.argv[1]) / "suite")
print(json.dumps({
    "package": benanza.__file__, "problems": problems(L.REGISTRY["LpNorm"]),
    "layers": [[ly.name, ly.status, ly.config.kind if ly.config else None, ly.fusion] for ly in ml.layers],
    "fusions": [[list(f.layers), f.config.kind, f.config.relu] for f in ml.fusions],
    "patterns": [p.name for p in L.PATTERNS][-1],
    "sources": sorted(p.name for p in (suite.root / "src").glob("*.cpp")),
    "cases": [line.strip().rsplit(", ", 1)[-1] for line in (suite.root / "src" / "lpnorm.cpp").read_text().splitlines()
              if '"LpNorm"' in line],
}))
'''


def test_a_new_kind_is_its_module_and_its_template(tmp_path):
    """A new kind, plain and fused, as a contributor adds it: ``benanza/kinds/lpnorm.py`` and
    ``templates/lpnorm.cpp.j2`` in a copy of the package and nothing else edited. The kind is registered
    (its module's KIND, found by the package), its ONNX op maps, its pattern runs after the others, a suite
    renders its cases, and the registry's checker finds one piece missing: its example's stored key here
    (EXAMPLE_KEYS). So a kind touches its module, its template, its test and this file (4 files; the
    pattern order above is the same file) and a kernel in cpp/src only where the libraries lack the op."""
    import filecmp
    import json
    import shutil
    import subprocess
    import sys

    root = tmp_path / "tree"
    shutil.copytree(REPO / "benanza", root / "benanza", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "templates", root / "templates")
    (root / "cpp").symlink_to(REPO / "cpp")
    (root / "benanza" / "kinds" / "lpnorm.py").write_text(NEW_KIND)
    (root / "templates" / "lpnorm.cpp.j2").write_text(NEW_TEMPLATE)
    for ours, theirs in ((root / "benanza", REPO / "benanza"), (root / "templates", REPO / "templates")):
        cmp = filecmp.dircmp(ours, theirs, ignore=["__pycache__"])
        added = [f for d in [cmp] + list(_subdirs(cmp)) for f in d.left_only]
        changed = [f for d in [cmp] + list(_subdirs(cmp)) for f in d.diff_files]
        assert changed == [] and added == (["lpnorm.py"] if ours.name == "benanza" else ["lpnorm.cpp.j2"])
    run = tmp_path / "run.py"
    run.write_text(NEW_KIND_RUN)
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, str(run), str(tmp_path), str(REPO / "tests")], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))
    assert len(got["problems"]) == 1 and got["problems"][0].startswith("key:"), got["problems"]
    assert got["layers"] == [["relu", "benchmark", "Activation", 0], ["norm", "benchmark", "LpNorm", 0],
                             ["alone", "benchmark", "LpNorm", None]]
    assert got["fusions"] == [[[0, 1], "LpNorm", True]] and got["patterns"] == "Relu -> LpNormalization"
    assert "lpnorm.cpp" in got["sources"] and sorted(got["cases"]) == ["false},", "true},"]  # plain, fused


def _subdirs(cmp):
    for sub in cmp.subdirs.values():
        yield sub
        yield from _subdirs(sub)
