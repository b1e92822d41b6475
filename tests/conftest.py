"""Shared fixtures: the real models in tests/data/zoo (weight-stripped exports and a PyTorch profile's sample), a fake suite (tests/fake_suite.py) that speaks
the suite protocol without a GPU, and temporary databases."""
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))


def _shared() -> Path:
    env = os.environ.get("BENANZA_SHARED")
    # the models and samples the tests need live in the repo (tests/data/zoo: weight-stripped ONNX
    # files and the heads of a PyTorch profile's logs), so a fresh clone tests everything
    for p in ([Path(env)] if env else []) + [HERE / "data" / "zoo"]:
        if (p / "models").is_dir():
            return p
    pytest.skip("the test models folder (tests/data/zoo/models) is not available")


@pytest.fixture(scope="session")
def shared() -> Path:
    return _shared()


@pytest.fixture(scope="session")
def models(shared) -> Path:
    return shared / "models"


def all_model_paths():
    try:
        return sorted((_shared() / "models").glob("*.onnx"))
    except BaseException:
        return []


@pytest.fixture
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'perf.db'}"


def make_fake_suite(folder: Path, model: Path, batches=(1,), precisions=("fp32",), layouts=None) -> Path:
    """Generate the real suite for ``model`` and put the fake executable where the build would."""
    from benanza.generation.generator import generate
    from benanza.processing.model import process

    mls = [process(model, b) for b in batches]
    generate(mls, list(precisions), folder, layouts=layouts)
    exe = folder / "build" / "benanza-suite"
    exe.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "fake_suite.py", exe)
    exe.chmod(0o755)
    return folder


def run_fake_suite(mls, precisions, folder: Path, db_url: str, gpu: str = "NVIDIA H100 80GB HBM3") -> Path:
    """Generate the real suite of ``mls`` (processed models) in ``precisions``, put the fake executable where
    the build would, and run it into ``db_url`` on a system named ``gpu`` (tests/fake_suite.py's times)."""
    from benanza.database.store import open_db
    from benanza.generation.generator import generate, load_suite
    from benanza.runner.run import RunOptions, run_suite

    generate(list(mls), list(precisions), folder)
    exe = folder / "build" / "benanza-suite"
    exe.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "fake_suite.py", exe)
    exe.chmod(0o755)
    old = os.environ.get("FAKE_SUITE_GPU")
    os.environ["FAKE_SUITE_GPU"] = gpu
    try:
        db = open_db(db_url)
        try:
            run_suite(load_suite(folder), db, RunOptions())
        finally:
            db.close()
    finally:
        if old is None:
            del os.environ["FAKE_SUITE_GPU"]
        else:
            os.environ["FAKE_SUITE_GPU"] = old
    return folder


@pytest.fixture
def fake_suite(tmp_path, models):
    return make_fake_suite(tmp_path / "suite", models / "googlenet.onnx", (1,), ("fp32", "fp16"))


def have_gpu() -> bool:
    try:
        from benanza import _native

        return _native.device_count() > 0
    except Exception:
        return False


# ------------------------------------------------------------------------ the session's harness

def _without_nvcc(path: str) -> str:
    return os.pathsep.join(d for d in path.split(os.pathsep) if d and not (Path(d) / "nvcc").exists())


def toolkit_out_of_reach(mp: pytest.MonkeyPatch, nowhere: Path) -> None:
    """Only the toolkit wheels, as on a machine with only a driver: BENANZA_CUDA_TOOLKIT=wheels,
    CUDA_HOME pointing at ``nowhere``, no CUDA_PATH, no nvcc on PATH."""
    mp.setenv("BENANZA_CUDA_TOOLKIT", "wheels")
    mp.setenv("CUDA_HOME", str(nowhere))
    mp.delenv("CUDA_PATH", raising=False)
    mp.setenv("PATH", _without_nvcc(os.environ.get("PATH", "")))


@dataclass
class Harness:
    """The harness library every suite the tests build links: compiled once per session (three to
    four minutes on two cores) into a cache of the session's own, by the first build there (the mlp
    suite: tests/first_build.py), with the toolkit wheels alone where the `cuda` extra is installed
    (a first build on a machine with only a driver: the harness and the suite's own sources at the
    same time), else with the toolkit benanza finds. That build starts in the background, at low
    priority, once the tests are collected, and the tests that use this fixture run last, so it
    compiles while the others run. A test that builds calls :meth:`use` first: its build finds the
    library cached."""

    cache: Path  # XDG_CACHE_HOME of the session's builds
    env: dict  # what :meth:`use` sets
    wheels: Path | None  # the toolkit wheels' nvidia/cu13 folder, None without the `cuda` extra
    libs: object  # CudaLibs the builds locate
    library: Path  # the harness library (libbenanza_harness.a)
    suite: object  # the first suite (mlp, fp32 and fp16)
    first: object  # its BuildResult: the fresh build that compiled the harness

    def use(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for k, v in self.env.items():
            monkeypatch.setenv(k, v)


#: the background first build: its process, folder, environment and log (started by pytest_collection_finish)
_FIRST_BUILD: dict = {}


def _uses_harness(item) -> bool:
    return "harness" in getattr(item, "fixturenames", ())


def _start_first_build() -> dict:
    import subprocess
    import tempfile

    from benanza.build.cudalibs import find_toolkit_wheels

    work = Path(tempfile.mkdtemp(prefix="benanza-harness-"))
    wheels = find_toolkit_wheels()
    env = {"XDG_CACHE_HOME": str(work / "cache")} | ({"BENANZA_CUDA_TOOLKIT": "wheels"} if wheels else {})
    run_env = dict(os.environ, BENANZA_BUILD_OVERLAP="1", **env)
    if wheels:  # as toolkit_out_of_reach
        run_env.update(CUDA_HOME=str(work / "no-toolkit"), PATH=_without_nvcc(run_env.get("PATH", "")))
        run_env.pop("CUDA_PATH", None)
    log = open(work / "first_build.log", "w")
    proc = subprocess.Popen([sys.executable, str(HERE / "first_build.py"), str(work)], env=run_env, text=True,
                            stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    _FIRST_BUILD.update(proc=proc, work=work, wheels=wheels, env=env, run_env=run_env, log=log)
    return _FIRST_BUILD


def pytest_collection_modifyitems(items):
    """The tests that build suites (the `harness` fixture) last, in their order: the session's harness
    compiles in the background while the others run."""
    items[:] = [i for i in items if not _uses_harness(i)] + [i for i in items if _uses_harness(i)]


def pytest_collection_finish(session):
    if not session.config.option.collectonly and any(_uses_harness(i) for i in session.items):
        _start_first_build()


def pytest_unconfigure(config):
    proc = _FIRST_BUILD.get("proc")
    if proc is None:
        return
    if proc.poll() is None:  # the session ended before a test needed it: the build and its compilers
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    _FIRST_BUILD["log"].close()
    shutil.rmtree(_FIRST_BUILD["work"], ignore_errors=True)


@pytest.fixture(scope="session")
def harness() -> Harness:
    import json

    from benanza.build.builder import BuildResult, harness_library_path, local_architectures
    from benanza.build.cudalibs import locate
    from benanza.generation.generator import load_suite

    fb = _FIRST_BUILD or _start_first_build()
    out, _ = fb["proc"].communicate()
    fb["log"].flush()
    if fb["proc"].returncode != 0:
        pytest.fail("the session's first suite build (tests/first_build.py) failed:\n"
                    + (fb["work"] / "first_build.log").read_text()[-3000:], pytrace=False)
    first = json.loads(out)
    first = BuildResult(**{k: Path(v) if k in ("executable", "log") else v for k, v in first.items()})
    with pytest.MonkeyPatch.context() as mp:
        for k in ("BENANZA_CUDA_TOOLKIT", "CUDA_HOME", "CUDA_PATH", "PATH", "XDG_CACHE_HOME"):
            if k in fb["run_env"]:
                mp.setenv(k, fb["run_env"][k])
            else:
                mp.delenv(k, raising=False)
        libs = locate()
        library = harness_library_path(libs, local_architectures())  # where build() put it
    return Harness(cache=fb["work"] / "cache", env=fb["env"], wheels=fb["wheels"], libs=libs, library=library,
                   suite=load_suite(fb["work"] / "suite"), first=first)


# ---------------------------------------------------------------------------- database backends

def _pg_admin_url():
    return os.environ.get("BENANZA_TEST_PG_URL")  # e.g. postgresql+psycopg://benanza:benanza@localhost/postgres


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request, tmp_path):
    """A fresh, empty database URL on each backend. PostgreSQL runs when BENANZA_TEST_PG_URL names
    a server (CI starts one and sets BENANZA_REQUIRE_PG=1, which turns its absence into a failure)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'perf.db'}"
        return
    admin = _pg_admin_url()
    if not admin:
        if os.environ.get("BENANZA_REQUIRE_PG"):
            pytest.fail("BENANZA_REQUIRE_PG is set but BENANZA_TEST_PG_URL is not")
        pytest.skip("no PostgreSQL server (set BENANZA_TEST_PG_URL)")
    import uuid

    import sqlalchemy as sa

    name = "bz_" + uuid.uuid4().hex[:12]
    eng = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(sa.text(f"CREATE DATABASE {name}"))
    url = sa.engine.make_url(admin).set(database=name).render_as_string(hide_password=False)
    yield url
    sa.engine.create_engine(url).dispose()
    # WITH (FORCE) terminates the database's other sessions; an autovacuum worker that the server
    # started on it (after a test's burst of writes) belongs to the superuser, and terminating it
    # is refused to this role (InsufficientPrivilege, seen on CI): it ends within moments, so try again
    for attempt in range(20):
        try:
            with eng.connect() as c:
                c.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            break
        except sa.exc.ProgrammingError:
            if attempt == 19:
                raise
            time.sleep(0.5)
    eng.dispose()


# ------------------------------------------------------------------------------- skip summary

#: what may skip, by the words of the skip reasons: no GPU, no PostgreSQL server, no torch, no
#: headless browser. Anything else skipping is a defect of the tests (CI fails on it: BENANZA_CI=1)
SKIP_CATEGORIES = (("GPU", ("gpu", "cuda", "device", "nvidia", "driver")),
                   ("PostgreSQL", ("postgres", "pg_url", "benanza_test_pg")),
                   ("torch", ("torch", "pytorch", "onnx2torch", "torchvision", "transformers")),
                   ("browser", ("chromium", "browser", "playwright")))


def skip_category(reason: str) -> str:
    """The category (:data:`SKIP_CATEGORIES`) of a skip reason, ``other`` when none fits."""
    r = reason.lower()
    for name, words in SKIP_CATEGORIES:
        if any(w in r for w in words):
            return name
    return "other"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line at the end: what skipped and why, by category; with BENANZA_CI=1 the session fails
    when a test skipped for another reason."""
    import collections

    reasons = collections.Counter()
    others = []
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        cat = skip_category(reason)
        reasons[cat] += 1
        if cat == "other":
            others.append(f"{rep.nodeid}: {reason}")
    if not reasons:
        terminalreporter.write_line("benanza: nothing skipped")
        return
    terminalreporter.write_line("benanza: skipped " + ", ".join(f"{n} without {c}" if c != "other" else f"{n} other"
                                                                for c, n in reasons.most_common()))
    if others and os.environ.get("BENANZA_CI"):
        for o in others[:10]:
            terminalreporter.write_line(f"  not allowed to skip (BENANZA_CI=1 fails the run): {o}")


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("BENANZA_CI") and exitstatus == 0:
        rep = session.config.pluginmanager.get_plugin("terminalreporter")
        if rep is not None:
            for r in rep.stats.get("skipped", []):
                lr = r.longrepr
                reason = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
                if skip_category(reason) == "other":
                    session.exitstatus = 1
                    return


# ---------------------------------------------------------------------------- --json documents

def envelope_of(text: str, document: str | None = None) -> dict:
    """A command's ``--json`` output, checked to be one envelope of the current schema
    (:mod:`benanza.reports.documents`), written by ``document`` when given."""
    import json

    from benanza.reports.documents import SCHEMA

    d = json.loads(text)
    assert isinstance(d, dict) and d.get("schema") == SCHEMA and "document" in d and "system" in d, \
        f"not a benanza --json envelope: {str(d)[:200]}"
    if document is not None:
        assert d["document"] == document
    return d


def scenario_of(text: str, document: str | None = None) -> dict:
    """The one scenario of a ``--json`` envelope (:func:`envelope_of`)."""
    d = envelope_of(text, document)
    assert len(d["scenarios"]) == 1, f"{len(d['scenarios'])} scenarios, not one"
    return d["scenarios"][0]


def records_of(text: str, document: str | None = None) -> list[dict]:
    """The records of a ``--json`` envelope (:func:`envelope_of`): ``db systems``, ``db query``, ..."""
    return envelope_of(text, document)["records"]
