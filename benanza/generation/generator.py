"""Benchmark generator: unique layer configs -> a C++ benchmark suite and its CMake project.

The suite is rendered from the Jinja templates in ``templates/`` (one translation unit per layer
kind; layer configs are *data* in a table, so compile time does not grow with the model) and the
fixed harness in ``cpp/`` (timing, statistics, device query, entry point), which is copied next to
it so the generated folder builds on its own.

Untrusted text (node names, the model name) reaches the generated code only through
:func:`cpp_string`, an escaped C++ string literal; identifiers and numbers come from configs.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import jinja2

from benanza import __version__
from benanza import kinds as L
from benanza.kinds.backend import Backend
from benanza.kinds.base import Job, JobId
from benanza.spec import LAYOUTS, parse_layouts, parse_precisions  # noqa: F401 (the vocabulary: benanza.spec)
from benanza.kinds.cpp import cpp_string
from benanza.errors import UsageError
from benanza.processing.model import ModelLayers
from benanza.processing.training import loss_config, optimizer_config, training_plan

#: where the templates and the C++ harness live: next to the package in a source checkout, inside
#: the package data when installed
_PKG = Path(__file__).resolve().parents[1]  # the benanza package


def _resource_dir(name: str) -> Path:
    for base in (_PKG / "_data", _PKG.parent):
        p = base / name
        if p.is_dir():
            return p
    raise FileNotFoundError(f"benanza resource folder {name!r} not found (broken install?)")


def templates_dir() -> Path:
    return _resource_dir("templates")


def harness_dir() -> Path:
    return _resource_dir("cpp")


_JOB_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


def job_id(config: L.LayerConfig, precision: str, layout: str = "NCHW") -> str:
    """The id of the job of ``config`` in ``precision`` and ``layout`` (:class:`benanza.kinds.base.JobId`)."""
    jid = str(JobId(config.key, precision, layout))
    assert _JOB_ID.match(jid), jid
    return jid


def job_layout(jid: str) -> str:
    """The tensor layout of a :func:`job_id` (:meth:`benanza.kinds.base.JobId.parse`)."""
    return JobId.parse(jid).layout


def job_source(jid: str) -> str:
    """``framework`` for a job of the framework's own kernels, else ``library`` (the generated
    suite's job: cuDNN, cuBLAS and benanza's kernels): the source of its :func:`job_backend`."""
    return JobId.parse(jid).source


def job_backend(jid: str) -> Backend:
    """The backend whose measurements the job ``jid`` owns (:attr:`benanza.kinds.base.JobId.backend`:
    the suite, or the framework's own kernels for an id ending in ``.torch``)."""
    return JobId.parse(jid).backend


def framework_job_id(jid: str) -> str:
    """The framework job of the same config, precision and layout as the suite job ``jid``."""
    return str(JobId.parse(jid).as_framework())


def _parse_choices(text: str, allowed, normalise, what: str, choices: str) -> list[str]:
    """A comma-separated list of ``allowed`` values (after ``normalise``), in order, without
    repeats. Raises :class:`UsageError` for an unknown value or an empty list."""
    out: list[str] = []
    for part in str(text).split(","):
        v = normalise(part.strip())
        if not v:
            continue
        if v not in allowed:
            raise UsageError(f"unknown {what} {part.strip()!r} (choose from {choices})")
        if v not in out:
            out.append(v)
    if not out:
        raise UsageError(f"no {what} given")
    return out


#: layer kinds that get an NHWC job when NHWC is asked for (see :func:`nhwc_job`). Activation,
#: Dropout and Unary layers do not: they read and write every element once in memory order, so a
#: channels-last tensor is the same call on the same bytes and their NCHW measurement serves an
#: NHWC analysis as it is (the analyzer accepts NCHW measurements under ``--layout nchw,nhwc``).
#: Elementwise layers get one only where the layout changes how the broadcast operand is read
#: (a per-channel operand, ...) and they read a convolution's output (directly or through other
#: image layers); a full-size or scalar operand is layout-agnostic as activations are.
NHWC_KINDS = tuple(name for name, kind in L.REGISTRY.items() if kind.nhwc)

#: kinds whose output stays an image (N, C, spatial...) when an input is one: how "a convolution's
#: neighbour" propagates through a CNN
_IMAGE_KINDS = tuple(name for name, kind in L.REGISTRY.items() if kind.image)


def image_layers(ml: ModelLayers) -> set[int]:
    """Indices of the layers that read an image a convolution made: a Conv's output and what
    image layers (:data:`_IMAGE_KINDS`, zero-cost Identity/Dropout) make of it at rank 3 to 5."""
    images: set[str] = set()
    found: set[int] = set()
    for ly in ml.layers:  # topological order
        rank_ok = bool(ly.output_shapes) and ly.output_shapes[0] is not None and 3 <= len(ly.output_shapes[0]) <= 5
        reads = any(t in images for t in ly.inputs)
        if ly.config is not None and ly.config.kind == "Conv":
            images.update(ly.outputs[:1])
            continue
        if not reads:
            continue
        found.add(ly.index)
        passes = (ly.status == "benchmark" and ly.config is not None and ly.config.kind in _IMAGE_KINDS
                  and ly.op_type != "Transpose") or \
            (ly.status == "zero_cost" and ly.op_type in ("Identity", "Dropout"))
        if passes and rank_ok:
            images.update(ly.outputs[:1])
    return found


def nhwc_job(cfg: L.LayerConfig, neighbour: bool) -> bool:
    """Whether ``cfg`` gets an NHWC job: its kind is measured channels-last (``Kind.nhwc``) and the
    kind's rule (``Kind.nhwc_job``; convolutions: always) takes this config; ``neighbour``: it reads a
    convolution's image."""
    kind = L.REGISTRY.get(cfg.kind)
    if kind is None or not kind.nhwc:
        return False
    return kind.nhwc_job(cfg, neighbour) if kind.nhwc_job else True


def gets_layout_job(cfg: L.LayerConfig, layout: str, neighbour: bool) -> bool:
    """Whether ``cfg`` gets a job in ``layout``: every config in NCHW; in NHWC, a config of a kind
    measured channels-last that :func:`nhwc_job` takes (``neighbour``: it reads a convolution's image)."""
    return layout == "NCHW" or (cfg.kind in NHWC_KINDS and nhwc_job(cfg, neighbour))


def layout_keys(ml: ModelLayers, layout: str) -> dict[str, list[str]]:
    """The layout-sensitive layer configs of ``ml`` (kinds measured channels-last too,
    :data:`NHWC_KINDS`) that :func:`plan_jobs` gives a ``layout`` job, by kind: {kind: [config keys]}."""
    neighbours = {ml.layers[i].key for i in image_layers(ml)} if layout == "NHWC" else set()
    out: dict[str, set[str]] = {}
    for ly in ml.benchmarked():
        cfg = ly.config
        if cfg.kind in NHWC_KINDS and gets_layout_job(cfg, layout, ly.key in neighbours):
            out.setdefault(cfg.kind, set()).add(ly.key)
    return {k: sorted(v) for k, v in sorted(out.items())}


def plan_jobs(models: list[ModelLayers], precisions: list[str], layouts: list[str] | None = None,
              conv_precision: str | None = None, train: bool = False, optimizer: str = "sgd") -> list[Job]:
    """The jobs for the unique configs of ``models`` (one model at several batch sizes, or several
    models) in the requested analysis precisions (:func:`benanza.kinds.precisions_for`) and layouts
    (``["NCHW"]`` by default; with ``"NHWC"``, convolutions and their neighbours get a second job on
    channels-last tensors, see :func:`nhwc_job`). ``conv_precision``: the convolutions
    (and cuDNN RNNs: :data:`benanza.kinds.CUDNN_TF32_KINDS`) in this precision instead of ``precisions`` (``tf32`` with
    ``["fp32"]``: PyTorch's fp32 default, TF32 convolutions and FP32 matmuls). ``train``: the
    backward calls of a training step too (:func:`benanza.processing.training.training_plan`),
    each in the precisions and layouts its forward layer gets, the loss on the model's output
    (:func:`benanza.processing.training.loss_config`), and the ``optimizer``'s step over
    the model's parameters (:func:`benanza.processing.training.optimizer_config`); no job for the
    fusion candidates a training step counts layer by layer (:func:`benanza.kinds.training_counts_layers`:
    residual Add -> norm groups, and Conv -> BatchNormalization folds, whose jobs take 25-64 % of a CNN's ``bench --train`` job
    seconds on an H200: docs/training.md), so ``bench --train``'s forward-pass
    figures leave those folds out as any unmeasured candidate (``bench`` without ``--train``
    times them)."""
    layouts = layouts or ["NCHW"]
    jobs: dict[str, Job] = {}

    def add(cfg, key_neighbour: bool, name: str):
        wanted = [conv_precision] if conv_precision and cfg.kind in L.CUDNN_TF32_KINDS else precisions
        for p in L.precisions_for(cfg, wanted):
            for lay in layouts:
                if not gets_layout_job(cfg, lay, key_neighbour):
                    continue
                jid = job_id(cfg, p, lay)
                if jid not in jobs:
                    jobs[jid] = Job(id=jid, config=cfg, precision=p, node=name, layout=lay)

    for ml in models:
        neighbours = set()
        if "NHWC" in layouts:
            neighbours = {ml.layers[i].key for i in image_layers(ml)}
        names = {}
        for ly in ml.benchmarked():
            names.setdefault(ly.config.key, ly.name)
        for f in ml.fusions:
            names.setdefault(f.config.key, ml.layers[f.layers[0]].name)
        for key, cfg in ml.unique_configs().items():
            if train and L.training_counts_layers(cfg):
                continue
            add(cfg, key in neighbours, names.get(key, ""))
        if train:
            plan = training_plan(ml)
            for call in plan.calls + plan.fused:
                fwd = ml.layers[call.layer]
                add(call.config, fwd.key in neighbours, fwd.name)
            loss, _ = loss_config(ml)
            if loss is not None:
                add(loss, False, "loss")
            opt = optimizer_config(ml, optimizer)
            if opt is not None:
                add(opt, False, f"{optimizer}.step")
    return list(jobs.values())


def training_folds_note(models: list[ModelLayers], train: bool) -> str:
    """What a ``--train`` plan (:func:`plan_jobs`) leaves out, for the generate step's line: ``""``
    without ``train`` or without such candidates, else `` (none for N Conv -> BatchNormalization
    folds: ...)``, N the unique :data:`benanza.kinds.INFERENCE_ONLY_FUSIONS` configs of ``models``."""
    folds = {f.config.key for ml in models for f in ml.fusions if f.config.kind in L.INFERENCE_ONLY_FUSIONS} \
        if train else set()
    return (f" (none for {len(folds)} Conv -> BatchNormalization fold{'s' if len(folds) != 1 else ''}: a training "
            f"step cannot fold its batch norms; `bench` without --train times them)") if folds else ""


# ----------------------------------------------------------------------------- case construction





#: kind -> (template file, case builder), from the kinds' registry
KIND_TEMPLATES = {name: (kind.template, kind.case) for name, kind in L.REGISTRY.items()}


def jinja_env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False)


@dataclass
class Suite:
    """A generated suite on disk: its folder, the job list and the manifest it wrote."""

    root: Path
    jobs: list[Job]
    manifest: dict


def parse_kinds(text: str | None) -> list[str] | None:
    """Parse ``"Activation,Elementwise"`` (layer kinds, as ``benanza layers`` names them; any case).
    None or empty: every kind. Raises :class:`UsageError` for an unknown kind."""
    if not text:
        return None
    by_lower = {k.lower(): k for k in KIND_TEMPLATES}
    return _parse_choices(text, set(KIND_TEMPLATES), lambda v: by_lower.get(v.lower(), v), "layer kind",
                          ", ".join(sorted(KIND_TEMPLATES)))


#: characters CMake cannot take in a source or build folder's path: ``;`` splits a list, ``$``
#: expands a variable, ``"`` ends a quoted argument, ``\\`` escapes; control characters end lines
_CMAKE_SPECIAL = re.compile(r'[;$"\\\x00-\x1f\x7f]')


def check_cmake_path(path: Path, what: str, hint: str = "") -> Path:
    """``path`` when CMake can configure and build there (resolved, it holds none of ``;``, ``$``,
    ``"``, ``\\`` or a control character: CMake's own compiler check fails there and writes a stray
    folder beside it); else :class:`UsageError` with one line naming ``what`` and the path
    (``hint``: what to change)."""
    full = str(Path(path).expanduser().absolute())
    bad = sorted(set(_CMAKE_SPECIAL.findall(full)))
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        raise UsageError(f"{what} {full!r}: CMake cannot build in a folder whose path holds {shown}; "
                         f"{hint or 'choose another folder'}")
    return Path(path)


def generate(models: list[ModelLayers], precisions: list[str], out_dir: str | Path,
             layouts: list[str] | None = None, kinds: list[str] | None = None,
             conv_precision: str | None = None, train: bool = False, optimizer: str = "sgd") -> Suite:
    """Write the C++ suite for ``models`` (their unique configs) in ``precisions`` into ``out_dir``.

    Writes ``CMakeLists.txt``, ``src/<kind>.cpp`` per layer kind present, ``src/suite_info.cpp``,
    the harness under ``harness/`` and ``suite.json`` (the manifest: jobs with their configs, the
    models and their layer graphs' summaries), whole or not at all (:func:`write_tree`). ``kinds``:
    only the jobs of these layer kinds (to measure again what a harness change touched). Returns the
    :class:`Suite`. Raises :class:`UsageError` when no layer of the models can be benchmarked (or none
    of ``kinds``), OSError naming the file that could not be written (a full disk: ENOSPC; nothing
    of the suite left, or the suite as it was). ``conv_precision``, ``train``, ``optimizer``: see
    :func:`plan_jobs`.
    """
    jobs = plan_jobs(models, precisions, layouts, conv_precision, train, optimizer)
    names = ", ".join(sorted({m.model for m in models}))
    if not jobs:
        raise UsageError(f"{names}: no benchmarkable layer (every layer is zero-cost or unsupported)")
    if kinds:
        jobs = [j for j in jobs if j.kind in kinds]
        if not jobs:
            raise UsageError(f"{names}: no layer of kind {', '.join(kinds)} to benchmark")
    root = check_cmake_path(Path(out_dir), "suite folder")
    files: dict[str, str] = {}
    env = jinja_env()
    by_kind: dict[str, list[Job]] = {}
    for j in jobs:
        by_kind.setdefault(j.kind, []).append(j)
    sources = []
    for kind in sorted(by_kind):
        tmpl, build = KIND_TEMPLATES[kind]
        cases = [build(j.config, j) for j in by_kind[kind]]
        text = env.get_template(tmpl).render(cases=cases, version=__version__)
        files[f"src/{kind.lower()}.cpp"] = text
    model_label = ", ".join(sorted({m.model for m in models}))
    files["src/suite_info.cpp"] = env.get_template("suite_info.cpp.j2").render(
        model=cpp_string(model_label), generator=cpp_string(f"benanza {__version__}"))
    sources = list(files)
    files.update({f"harness/{rel.as_posix()}": text for rel, text in harness_files()})  # it travels with the suite
    files["CMakeLists.txt"] = env.get_template("CMakeLists.txt.j2").render(
        sources=sources, version=__version__, harness_only=False, **harness_sources())
    manifest = {
        "benanza_version": __version__,
        "precisions": precisions,
        "layouts": layouts or ["NCHW"],
        "models": [{"model": m.model, "path": m.path, "sha256": m.sha256, "batch": m.batch,
                    "summary": m.summary(), "key_counts": _key_counts(m),
                    # every config the model uses, jobs or not (an NHWC-only suite has no job for
                    # a Gemm), so that the database knows each key the model's record names
                    "configs": [{"kind": c.kind, "params": c.params()} for c in _model_configs(m, train, optimizer)]}
                   for m in models],
        "train": train,
        "jobs": [j.to_dict() for j in jobs],
        "sources": sources,
        "fingerprint": hashlib.sha256(json.dumps(sources + [j.id for j in jobs]).encode()).hexdigest()[:16],
    }
    files["suite.json"] = json.dumps(manifest, indent=1, sort_keys=True) + "\n"  # last: a suite once it is there
    write_tree(root, files)
    for stale in (root / "src").glob("*.cpp"):
        if f"src/{stale.name}" not in sources:
            stale.unlink()
    return Suite(root=root, jobs=jobs, manifest=manifest)


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Write ``files`` (path relative to ``root`` -> text) whole or not at all. A new ``root`` is
    written into a temporary folder beside it, renamed to ``root`` at the end (removed on failure,
    with the folders made above it); in an existing ``root`` each changed file is written to a
    temporary file beside it, and only when all are written are they renamed over the old ones, in
    order (unchanged files are not touched, so a rebuild recompiles only what changed). Raises
    OSError (ENOSPC on a full disk...) naming the file of ``root`` that could not be written."""
    import tempfile

    if root.exists():
        return _write_over(root, files)
    made = [p for p in reversed(root.parents) if not p.exists()]
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=root.parent))
    except OSError as e:
        _remove_folders(made)
        raise OSError(e.errno, e.strerror, str(root)) from None
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would stay the suite's
        for rel, text in files.items():
            _write_file(tmp / rel, text, root / rel)
        os.rename(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_folders(made)
        raise


def _write_over(root: Path, files: dict[str, str]) -> None:
    """:func:`write_tree` into the existing folder ``root``."""
    import tempfile

    staged: list[tuple[Path, Path]] = []
    try:
        for rel, text in files.items():
            path = root / rel
            if path.is_file() and path.read_text() == text:
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                os.close(fd)
            except OSError as e:
                raise OSError(e.errno, e.strerror, str(path)) from None
            staged.append((Path(tmp), path))
            _write_file(Path(tmp), text, path)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise


def _write_file(path: Path, text: str, shown: Path) -> None:
    """``text`` into the file ``path`` (its folder made), with the mode ``open`` gives under the
    umask; an OSError names ``shown``, the file the user will look for."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            view = memoryview(text.encode())
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(shown)) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_folders(folders: list[Path]) -> None:
    """Remove the (empty) folders a failed write made, the deepest first."""
    for d in reversed(folders):
        try:
            d.rmdir()
        except OSError:
            pass


def harness_files() -> list[tuple[Path, str]]:
    """The harness sources a suite is built with: (path relative to ``harness/``, text)."""
    out = []
    for sub in ("include", "src"):
        base = harness_dir() / sub
        for f in sorted(base.rglob("*")):
            if f.is_file() and f.name != "module.cpp":
                out.append((Path(sub) / f.relative_to(base), f.read_text()))
    return out


def harness_sources() -> dict[str, list[str]]:
    """The harness's compiled sources (``src/*.cpp``, ``src/*.cu``) and those that include
    cudnn-frontend (compiled without optimisation: heavy headers, nothing on the timed path)."""
    srcs = [(str(rel), text) for rel, text in harness_files() if rel.parts[0] == "src"
            and rel.suffix in (".cpp", ".cu")]
    return {"harness_sources": [r for r, _ in srcs],
            "frontend_sources": [r for r, t in srcs if "#include <cudnn_frontend.h>" in t]}


def copy_harness(root: Path) -> None:
    for rel, text in harness_files():
        target = root / "harness" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        write_if_changed(target, text)


def render_harness_project(root: Path) -> None:
    """The CMake project of the harness library alone (what `benanza build` caches)."""
    copy_harness(root)
    text = jinja_env().get_template("CMakeLists.txt.j2").render(sources=[], version=__version__, harness_only=True,
                                                           **harness_sources())
    write_if_changed(root / "CMakeLists.txt", text)


def _model_configs(m: ModelLayers, train: bool, optimizer: str = "sgd") -> list:
    """Every config of ``m`` the database is to know: its layers' and fusions', and with ``train``
    its backward calls' (:func:`benanza.processing.training.training_plan`), its loss's and its
    optimizer step's."""
    configs = dict(m.unique_configs())
    if train:
        configs.update(training_plan(m).configs())
        loss, _ = loss_config(m)
        if loss is not None:
            configs[loss.key] = loss
        opt = optimizer_config(m, optimizer)
        if opt is not None:
            configs[opt.key] = opt
    return list(configs.values())


def _key_counts(m: ModelLayers) -> dict[str, int]:
    """How often each config key occurs in the model: its benchmarked layers and its fusion
    candidates (a model's record names both, so that ``db export --model`` takes the fused
    measurements with it)."""
    out: dict[str, int] = {}
    for ly in m.benchmarked():
        out[ly.key] = out.get(ly.key, 0) + 1
    for f in m.fusions:
        out[f.config.key] = out.get(f.config.key, 0) + 1
    return out


def write_if_changed(path: Path, text: str) -> None:
    """Write only when the content differs, so a rebuild recompiles only what changed."""
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)


def load_suite(folder: str | Path) -> Suite:
    """Read a generated suite's manifest. Raises :class:`UsageError` if ``folder`` is not one."""
    root = Path(folder)
    mf = root / "suite.json"
    if not mf.is_file():
        raise UsageError(f"{folder}: not a benanza suite (no suite.json); run `benanza generate` first")
    try:
        manifest = json.loads(mf.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{mf}: unreadable suite manifest ({e})") from None
    jobs = [Job(id=j["job"], config=L.config_from_params(j["kind"], j["params"]), precision=j["precision"],
                node=j.get("node", ""), layout=j.get("layout", "NCHW")) for j in manifest.get("jobs", [])]
    return Suite(root=root, jobs=jobs, manifest=manifest)
