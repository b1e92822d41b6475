"""The typed records between the harness and the database (benanza/database/records.py), and one meaning
of batch in layer configs (issue 16)."""
import dataclasses
import json
import re

import pytest
import sqlalchemy as sa

from benanza import kinds as L
from benanza.database.store import JobRow, LayerConfigRow, Measurement, open_db
from benanza.generation.generator import load_suite
from benanza.database.records import ChoiceLine, MeasurementLine, RecordError, parse_record
from benanza.runner.run import RunOptions, run_suite
from conftest import REPO

HARNESS = REPO / "cpp" / "src" / "harness.cpp"


def _harness_keys() -> tuple[set[str], set[str]]:
    """(measurement keys, choice keys) the harness prints: every ``kv("key"``/``raw("key"`` and the
    statistics of ``stats_fields`` (``p + "median_ms"``), the choice's from ``Bench::choice``."""
    src = HARNESS.read_text()
    choice = src[src.index("void Bench::choice("):src.index("void Bench::sample(")]
    rest = src.replace(choice, "")
    pat = re.compile(r'(?:kv|raw)\("(\w+)"')
    return set(pat.findall(rest)) | set(re.findall(r'\(p \+ "(\w+)"\)', rest)), set(pat.findall(choice))


def test_the_records_mirror_every_key_the_harness_prints():
    measurement, choice = _harness_keys()
    assert {"median_ms", "cache", "call", "details", "estimate_ms"} <= measurement  # the scan works
    assert {f.name for f in dataclasses.fields(MeasurementLine)} == measurement
    assert {f.name for f in dataclasses.fields(ChoiceLine)} == choice


def test_the_framework_workers_statistics_are_record_fields():
    """benanza.profiles.torch_candidates prints the harness's keys (its summarize mirrors the harness's)."""
    import benanza.profiles.torch_candidates as T

    stats = T.summarize([1.0, 1.1, 0.9, 1.0], T.Policy(min_samples=3, rse=0.1))
    r = MeasurementLine.from_json({"type": "measurement", "call": "torch:aten::relu", "algorithm": "default",
                                   "math": "none", "dtype": "float16", "status": "ok", "cache": "warm",
                                   "warmup_calls": 5, "details": {"torch": "2.11"}, **stats})
    assert r.median_ms == 1.0 and r.samples == 4 and r.valid and r.details == {"torch": "2.11"}


LINE = {"type": "measurement", "job": "conv-1.fp16", "layer_key": "conv-1", "kind": "Conv", "precision": "fp16",
        "call": "cudnnConvolutionForward", "algorithm": "IMPLICIT_GEMM", "math": "tensor_op", "dtype": "float16",
        "workspace_bytes": 0, "cache": "warm", "status": "ok", "method": "cuda_graph", "reps": 8, "host_us": 4.0,
        "median_ms": 0.25, "q1_ms": 0.24, "q3_ms": 0.26, "mean_ms": 0.25, "min_ms": 0.2, "max_ms": 0.3,
        "stddev_ms": 0.01, "rse": None, "samples": 12, "converged": True, "dropped": 0, "power_capped": 0,
        "clock_reasons": 0, "sm_clock_min_mhz": 1980, "sm_clock_max_mhz": 1980, "samples_ms": [0.25, 1]}


def test_a_line_parses_with_its_types():
    r = parse_record(LINE)
    assert isinstance(r, MeasurementLine) and r.median_ms == 0.25 and r.rse is None and r.samples_ms == (0.25, 1.0)
    assert r.layout == "NCHW" and r.details == {} and r.valid
    assert parse_record({"type": "job_start", "job": "x"}) is None
    c = parse_record({"type": "choice", "source": "h", "rank": 1, "algorithm": "a", "math": "fma", "status": "ok"})
    assert isinstance(c, ChoiceLine) and c.rank == 1 and c.workspace_bytes == 0
    # ok without a finite time is not a valid measurement
    assert not MeasurementLine.from_json(dict(LINE, median_ms=None)).valid
    assert not MeasurementLine.from_json(dict(LINE, median_ms=float("nan"))).valid


@pytest.mark.parametrize("change, message", [
    ({"median_ms": "0.25"}, "'median_ms' is '0.25' (str), expected a number"),
    ({"samples": True}, "'samples' is True (bool), expected an integer"),
    ({"samples": 1.5}, "'samples' is 1.5 (float), expected an integer"),
    ({"call": None}, "'call' is null, expected a string"),
    ({"details": [1]}, "'details' is [1] (list), expected an object"),
    ({"converged": 1}, "'converged' is 1 (int), expected true or false"),
    ({"samples_ms": [0.1, "x"]}, "'samples_ms' is"),
    ({"call": ...}, "no 'call'"),
])
def test_a_malformed_line_says_which_field_of_which_job(change, message):
    d = {k: v for k, v in dict(LINE, **change).items() if v is not ...}
    with pytest.raises(RecordError) as e:
        MeasurementLine.from_json(d)
    assert str(e.value).startswith("measurement line of job 'conv-1.fp16': ") and message in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(RecordError, match="'type' is 'choice', expected 'measurement'"):
        MeasurementLine.from_json(dict(LINE, type="choice"))


def test_write_job_takes_typed_records_only(db_url):
    db = open_db(db_url)
    sid = db.upsert_system({"gpu_name": "G", "compute_capability": "9.0", "sm_count": 1})
    cfg = L.ActivationConfig((2, 8), "relu")
    db.upsert_configs([cfg])
    with pytest.raises(TypeError, match="not dict"):
        db.write_job(sid, None, "j", cfg.key, "fp16", "ok", "", [dict(LINE)])
    assert db.jobs_done(sid) == set()


def test_a_malformed_line_fails_its_job_and_keeps_the_rest(fake_suite, db_url, monkeypatch):
    """The fake suite prints one measurement of the victim with a string for its median: the job is
    failed with a message naming the field, its well-formed measurements are stored, other jobs run."""
    suite = load_suite(fake_suite)
    victim = next(j.id for j in suite.jobs if j.kind == "Conv")
    monkeypatch.setenv("FAKE_SUITE_MALFORMED", victim)
    s = run_suite(suite, open_db(db_url), RunOptions())
    assert s.failed == 1 and s.ok == len(suite.jobs) - 1 and s.restarts == 0
    assert s.failures[0][0] == victim and "malformed record" in s.failures[0][1] and "'median_ms'" in s.failures[0][1]
    db = open_db(db_url)
    with db.session() as ses:
        row = ses.query(JobRow).filter_by(job=victim).one()
        assert row.status == "failed" and "'0.5 ms' (str)" in row.message
        algos = {m.algorithm for m in ses.query(Measurement).filter_by(layer_key=row.layer_key,
                                                                        precision=row.precision)}
    assert algos == {"IMPLICIT_PRECOMP_GEMM", "WINOGRAD"}  # the malformed IMPLICIT_GEMM line is not stored


# ------------------------------------------------------------------------------- one meaning of batch

def test_a_gemms_batch_count_is_named_apart_and_stored_as_before():
    g = L.GemmConfig(m=197, n=64, k=197, batch_count=12)
    assert not hasattr(g, "batch")  # no second meaning: a config has no "batch" unless its kind names one
    assert g.batch_count == 12 and g.params()["batch"] == 12 and "batch_count" not in g.params()
    assert L.config_from_params("Gemm", g.params()) == g
    fc = L.GemmConfig(m=32, n=1000, k=2048, trans_b=True, bias="c")  # resnet50's classifier at batch 32
    assert fc.batch_count == 1 and fc.input_shapes()[0][0] == 32
    conv = L.ConvConfig(x=(32, 64, 56, 56), w=(64, 64, 3, 3), pads=(1, 1, 1, 1), strides=(1, 1),
                        dilations=(1, 1), group=1, bias=True)
    assert conv.batch_count == 32


@pytest.mark.parametrize("name", ["h200.sqlite.gz", "h200_truth.sqlite.gz", "h100_h200_fp16.sqlite.gz"])
def test_every_reference_config_keeps_its_key_and_stored_row(name):
    """Each layer config of the reference databases rebuilt from its stored parameters has the stored
    key, batch count (``layer_configs.batch``), description and FLOPs: the rows are what they were."""
    db = open_db(str(REPO / "db" / "reference" / name), create=False)
    with db.session() as s:
        rows = list(s.scalars(sa.select(LayerConfigRow)))
    assert len(rows) > 500
    kinds = set()
    for r in rows:
        c = L.config_from_params(r.kind, json.loads(r.params))
        assert (c.key, c.batch_count, c.describe(), c.flops()) == (r.key, r.batch, r.description, r.flops), r.key
        kinds.add((r.kind, r.batch > 1))
    if name != "h200.sqlite.gz":
        assert ("Gemm", True) in kinds  # batched GEMMs (attention) among them
