"""Concurrent first use of one empty database (issue 28, item 3): eight processes started at once on
a fresh PostgreSQL database or a SQLite file that does not exist yet (four `benanza db import`s of one
exported database, four writing another system as `bench`/`run` do: system, configs, jobs, ceilings,
counters, model record) all succeed, and every row is stored exactly once. Before the fix, 3 of 4
imports into a fresh PostgreSQL database failed on ``pg_type_typname_nsp_index`` (two processes
creating the schema), and imports into a made schema on the unique keys of ceilings, orphan
measurements and counters (a read, then an insert)."""
import multiprocessing as mp

import sqlalchemy as sa

from benanza import kinds as L
from benanza.database.records import ChoiceLine, MeasurementLine

N_PROCS = 8
SYSTEM = {"gpu_name": "Race GPU", "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 80 << 30,
          "l2_cache_bytes": 50 << 20, "memory_bus_width_bits": 5120, "max_sm_clock_mhz": 1980,
          "max_mem_clock_mhz": 2619, "driver_version": "580.1", "driver_cuda_version": 13000,
          "runtime_version": 13000, "cudnn_version": 91900, "cublas_version": 130100}
SYSTEM_B = dict(SYSTEM, gpu_name="Race GPU B")
CEILINGS = [{"name": "dram_bw", "unit": "bytes/s", "value": 3.0e12, "work": 3.0e9, "median_ms": 1.0},
            {"name": "fp16_tc", "unit": "FLOP/s", "value": 9.0e14, "work": 9.0e11, "median_ms": 1.0}]


def _configs():
    return [k.example for k in list(L.REGISTRY.values())[:6]]


def _lines(i: int):
    ms = [MeasurementLine(call="cudnnX", algorithm=f"algo{a}", math="default", dtype="float", status="ok",
                          median_ms=0.1 * (i + a + 1), samples=10, converged=True) for a in range(3)]
    return ms + [ChoiceLine(source="heuristic", rank=0, algorithm="algo0", math="default", status="ok")]


def _source(path):
    """A small exported database: one system, 6 configs, 6 jobs of 3 measurements and 1 choice, 2
    ceilings, 1 model record, 1 orphan measurement (no job), 2 kernel counters."""
    from benanza.database.counters import write_counters
    from benanza.database.store import Measurement, open_db

    db = open_db(str(path))
    sid = db.upsert_system(SYSTEM)
    cfgs = _configs()
    db.upsert_configs(cfgs)
    run = db.start_run(sid, "suite", "race", len(cfgs))
    for i, c in enumerate(cfgs):
        db.write_job(sid, run, f"{c.key}.fp32", c.key, "fp32", "ok", "", _lines(i))
    db.write_ceilings(sid, CEILINGS)
    db.record_model("race", "ab" * 32, 1, {"layers": 6, "unique_layers": 6}, {c.key: 1 for c in cfgs})
    with db.session() as s:
        s.add(Measurement(system_id=sid, layer_key=cfgs[0].key, precision="fp16", call="hand", algorithm="a",
                          math="default", dtype="half", cache="warm", batch=1, status="ok", median_ms=1.0))
    write_counters(db, sid, (cfgs[0].key, "fp32", "cudnnX", "algo0", "default", "NCHW"),
                   [{"kernel_index": i, "kernel_name": f"k{i}"} for i in range(2)])
    db.engine.dispose()


def _write_like_a_run(db, cfgs) -> None:
    """What `bench`/`run` write for one system: the system, its configs, a run, every job (the same
    jobs in each process: each write replaces the last, exactly once), ceilings, counters, the model."""
    from benanza.database.counters import write_counters

    sid = db.upsert_system(SYSTEM_B)
    db.upsert_system(SYSTEM_B, authoritative=True)
    db.upsert_configs(cfgs)
    run = db.start_run(sid, "suite", "race", len(cfgs))
    for i, c in enumerate(cfgs):
        db.write_job(sid, run, f"{c.key}.fp32", c.key, "fp32", "ok", "", _lines(i))
    db.write_ceilings(sid, CEILINGS)
    write_counters(db, sid, (cfgs[0].key, "fp32", "cudnnX", "algo0", "default", "NCHW"),
                   [{"kernel_index": i, "kernel_name": f"k{i}"} for i in range(2)])
    db.record_model("race", "ab" * 32, 1, {"layers": 6, "unique_layers": 6}, {c.key: 1 for c in cfgs})
    db.finish_run(run, "completed", len(cfgs))


def _worker(mode, url, src, barrier, q):
    """One process's first use of the database at ``url``, started with the others (``barrier``):
    ``import`` merges ``src`` (`benanza db import`), ``run`` writes as `benanza run` does."""
    try:
        from benanza.database import sharing
        from benanza.database.store import open_db

        cfgs = _configs()
        barrier.wait(120)
        db = open_db(url)
        if mode == "import":
            q.put(("ok", sharing.import_db(db, str(src)).to_dict()))
        else:
            _write_like_a_run(db, cfgs)
            q.put(("ok", {}))
        db.engine.dispose()
    except BaseException as e:  # noqa: BLE001 - the test reports it
        q.put(("error", f"{mode}: {type(e).__name__}: {e}"))


def _counts(url) -> dict[str, int]:
    eng = sa.create_engine(url)
    try:
        with eng.connect() as c:
            return {t: c.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in (
                "systems", "layer_configs", "jobs", "measurements", "choices", "ceilings", "models",
                "model_configs", "kernel_counters", "runs")}
    finally:
        eng.dispose()


def test_eight_first_uses_of_an_empty_database_at_once(backend_url, tmp_path):
    """Four `db import`s of one export (system A) and four run-like writers (system B) start at once
    on an empty database: all succeed, and each row is there once."""
    src = tmp_path / "src.db"
    _source(src)
    # fresh processes that never touched the database, forked from a server that imported benanza
    # once (spawn would import it in each of the eight: seconds of CPU apiece)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "benanza.database.sharing", "benanza.database.store"])
    barrier, q = ctx.Barrier(N_PROCS), ctx.Queue()
    modes = ["import", "run"] * (N_PROCS // 2)
    ps = [ctx.Process(target=_worker, args=(m, backend_url, src, barrier, q)) for m in modes]
    for p in ps:
        p.start()
    got = [q.get(timeout=180) for _ in ps]
    for p in ps:
        p.join(30)
    assert [g[0] for g in got] == ["ok"] * N_PROCS, [g[1] for g in got if g[0] != "ok"]
    stats = [g[1] for g in got if g[1]]
    assert len(stats) == N_PROCS // 2
    # system A: its 6 jobs of 3 measurements and 1 choice, 1 orphan measurement, 2 ceilings, 2 counters,
    # 1 run (the import that added the jobs copies the run they name; the orphan names none);
    # system B: the same jobs written 4 times (each replacing the last), 2 ceilings, 2 counters, 4 runs;
    # the 6 configs and the model record shared by both
    assert _counts(backend_url) == {"systems": 2, "layer_configs": 6, "jobs": 12, "measurements": 2 * 6 * 3 + 1,
                                    "choices": 12, "ceilings": 4, "models": 1, "model_configs": 6,
                                    "kernel_counters": 4, "runs": 1 + N_PROCS // 2}
    assert sum(s["systems_added"] for s in stats) == 1
    assert sum(s["jobs_added"] for s in stats) == 6
    assert sum(s["ceilings_written"] for s in stats) == 2
    assert sum(s["orphans_written"] for s in stats) == 1
    assert sum(s["counters_written"] for s in stats) == 2
