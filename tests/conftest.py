"""Shared fixtures: the real models in tests/data/zoo (weight-stripped exports and a PyTorch profile's sample), a fake suite (tests/fake_suite.py) that speaks
the suite protocol without a GPU, and temporary databases."""
import os
import shutil
import sys
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


@pytest.fixture
def fake_suite(tmp_path, models):
    return make_fake_suite(tmp_path / "suite", models / "googlenet.onnx", (1,), ("fp32", "fp16"))


def have_gpu() -> bool:
    try:
        from benanza import _native

        return _native.device_count() > 0
    except Exception:
        return False


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
    with eng.connect() as c:
        c.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
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
