"""The paged KV cache family of a decode attention (issue 27, item 1): a decode SDPA config (s_kv > s_q) is
also timed over a paged KV cache (containers [num_pages, h_kv, page, d], an int32 page table
[b, 1, pages_per_seq, 1] of shuffled pages, padding mask with s_kv per sequence), recorded in layout
``PAGED_KV`` as a what-if that never enters the LBL.

Without a GPU nothing is timed here: the page table is checked in Python and against the C++ header the
suite runs (compiled and run with g++), the byte counts by arithmetic, the skip reasons, the rendered
case table, and the rule that the database never serves a PAGED_KV row to a layer's minimum. The
cuDNN graph construction (cpp/src/transformer_engines.cpp) is compile-checked only (g++ -fsyntax-only,
with and without the cudnn-frontend headers), as is the generated suite's source."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.kinds.sdpa import PAGED_KV_LAYOUT, _min_bytes, is_decode, page_table, pages_per_seq, paged_kv_bytes, paged_kv_skip
from benanza.processing.model import Layer, ModelLayers
from conftest import REPO
from onnx_builders import HOSTILE
from test_unary_backward import syntax_check


def _decode(**kw):
    base = dict(b=2, h=8, h_kv=2, s_q=1, s_kv=100, d=64, d_v=64, scale=0.125, mask="causal_bottom_right")
    return L.SdpaConfig(**(base | kw))


@pytest.mark.parametrize("b,s_kv,page", [(1, 4096, 64), (3, 100, 64), (4, 4097, 64), (2, 10, 16), (5, 1, 64)])
def test_the_page_table_uses_every_page_once_shuffled(b, s_kv, page):
    per = pages_per_seq(s_kv, page)
    assert per == -(-s_kv // page) and (per - 1) * page < s_kv <= per * page
    t = page_table(b, per)
    assert t.shape == (b, 1, per, 1) and t.dtype == np.int32
    flat = t.reshape(-1)
    assert sorted(flat.tolist()) == list(range(b * per))  # every page once
    if b * per >= 8:  # shuffled: not the identity, and some sequence's pages are not consecutive
        assert not np.array_equal(flat, np.arange(b * per))
        assert any(np.any(np.diff(t[i, 0, :, 0]) != 1) for i in range(b))
    assert np.array_equal(page_table(b, per), t)  # one fixed seed: the same table every run


def test_the_cpp_table_is_the_python_table(tmp_path):
    """cpp/include/benanza/paged_kv.hpp (what the suite runs) compiled with g++ and run: the same tables."""
    if not shutil.which("g++"):
        pytest.skip("g++ is missing")
    src = tmp_path / "t.cpp"
    src.write_text('#include <cstdio>\n#include "benanza/paged_kv.hpp"\nint main() {\n'
                   '  const long long cases[3][2] = {{3, 5}, {2, 70}, {1, 1}};\n'
                   '  for (auto& c : cases) { for (int v : benanza::paged_kv_table(c[0], c[1])) std::printf("%d ", v);'
                   ' std::printf("\\n"); }\n  std::printf("%lld\\n", benanza::paged_kv_pages_per_seq(4097, 64));\n}\n')
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{REPO / 'cpp' / 'include'}", str(src), "-o", str(tmp_path / "t")],
                   check=True, capture_output=True, text=True)
    lines = subprocess.run([str(tmp_path / "t")], check=True, capture_output=True, text=True).stdout.splitlines()
    for line, (b, per) in zip(lines, [(3, 5), (2, 70), (1, 1)]):
        assert [int(x) for x in line.split()] == page_table(b, per).reshape(-1).tolist()
    assert int(lines[3]) == pages_per_seq(4097, 64) == 65


def test_the_byte_counts():
    cfg = _decode()  # b 2, h_kv 2, s_kv 100, d 64, page 64: 2 pages a sequence, 4 pages
    got = paged_kv_bytes(cfg, 2, 2)
    assert got["containers"] == 4 * 2 * 64 * (64 + 64) * 2  # pages * h_kv * page * (d + d_v) * 2 bytes
    assert got["tables"] == 2 * 2 * 2 * 4 + 2 * 2 * 4  # K and V tables (b, 1, 2, 1) int32 + two length tensors
    q = o = 2 * 8 * 1 * 64 * 2
    kv = 2 * (2 * 2 * 100 * 64 * 2)  # the s_kv tokens of K and V, not the pages' unused tail
    assert _min_bytes(cfg, 2, 2) == q + kv + o
    assert got["min"] == q + kv + o + got["tables"]
    small = paged_kv_bytes(L.SdpaConfig(**{**_decode().__dict__, "kv_page": 16}), 2, 2)
    assert small["containers"] == 2 * 7 * 2 * 16 * 128 * 2 and small["min"] > got["min"] - got["tables"]


def test_which_configs_get_the_family_and_why_not():
    assert is_decode(_decode()) and not is_decode(_decode(s_q=100, mask="causal"))
    assert paged_kv_skip(_decode(s_q=100, mask="causal"), "fp16") is None  # prefill: no family, no record
    assert paged_kv_skip(_decode(), "fp16") == "" and paged_kv_skip(_decode(), "bf16") == ""
    assert "FP16/BF16" in paged_kv_skip(_decode(), "fp32") and "tf32" in paged_kv_skip(_decode(), "tf32")
    assert "bias" in paged_kv_skip(_decode(mask="bias", bias=(2, 1, 1, 100)), "fp16")
    assert "multiples of 8" in paged_kv_skip(_decode(d=20, d_v=20), "fp16")
    assert "at most 256" in paged_kv_skip(_decode(d=512, d_v=512), "bf16")
    assert "int32" in paged_kv_skip(_decode(b=1 << 20, s_kv=1 << 22, kv_page=1), "fp16")
    with pytest.raises(ValueError, match="kv_page"):
        _decode(kv_page=0)
    # the knob keeps the keys of configs stored before it (default 64 left out of the key)
    assert _decode().key == L.SdpaConfig(**{**_decode().__dict__}).key != _decode(kv_page=16).key


def _model() -> ModelLayers:
    cfgs = [_decode(), _decode(d=20, d_v=20), _decode(s_q=100, mask="causal")]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"att{i}", op_type="Attention", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="paged", path="", sha256="0" * 64, batch=2, dtype="float16", opset=23,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_case_table_carries_the_family_and_compiles(tmp_path):
    suite = generate([_model()], ["fp32", "fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"SDPA"} and len(suite.jobs) == 3 * 2
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src
    rows = [ln for ln in src.splitlines() if "SdpaMask::" in ln and ln.lstrip().startswith("{")]
    fp16 = [r for r in rows if "FP16" in r]
    fp32 = [r for r in rows if "FP32" in r]
    # b h s_q s_kv d d_v ... h_kv, stats, kv_page, paged_skip, v_in_k
    assert any("2, 8, 1, 100, 64, 64, 0.125, SdpaMask::CAUSAL_BOTTOM_RIGHT" in r and r.endswith(', 2, false, 64, "", false},')
               for r in fp16), fp16
    assert any("100, 20, 20," in r and ", 64, \"paged KV cache: head dims d 20" in r for r in fp16)
    assert any("2, 8, 100, 100, 64" in r and r.endswith(', 0, "", false},') for r in fp16)  # prefill: no family
    assert all("FP16/BF16 data, not fp32" in r for r in fp32 if ", 1, 100, " in r)
    assert "spec.kv_page = c.kv_page;" in src
    syntax_check(tmp_path / "s", "sdpa.cpp")


def test_the_paged_graph_compiles_without_the_frontend():
    """cpp/src/transformer_engines.cpp without the cudnn-frontend headers (g++ -fsyntax-only): the paged
    family then records one skipped row. With the headers the same file (the paged graph,
    run_sdpa_paged_engines) and engines.cpp (time_graph's algorithm family) are compiled by the
    session's harness build (conftest.harness; tests/test_harness_build.py)."""
    import site
    from pathlib import Path

    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia").is_dir()), None)
    if not shutil.which("g++") or sp is None or not (sp / "nvidia" / "cu13" / "include" / "cublas_v2.h").exists():
        pytest.skip("g++ or the pip wheels' CUDA/cuDNN/cuBLAS headers are missing")
    inc = [REPO / "cpp" / "include", sp / "nvidia" / "cudnn" / "include", sp / "nvidia" / "cu13" / "include",
           sp / "include"]
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DBENANZA_WITH_FRONTEND=0",
                        *[f"-I{p}" for p in inc], str(REPO / "cpp" / "src" / "transformer_engines.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    text = (REPO / "cpp" / "src" / "transformer_engines.cpp").read_text()
    assert "set_paged_attention_k_table" in text and "set_padding_mask(true)" in text
    assert text.count('layout = "PAGED_KV"') == 3 and PAGED_KV_LAYOUT == "PAGED_KV"


def test_a_paged_row_is_never_the_layers_minimum(db_url):
    """A decode SDPA job whose paged row (layout PAGED_KV) is faster than its contiguous one: the fastest
    valid measurement that serves the LBL (query.Serves, every layout an analysis takes: NCHW, NHWC) is
    the contiguous row; the paged row stays readable as a what-if; rewriting the job replaces its paged
    rows with it (the NCHW job owns them), never duplicates them; a skipped paged row has no time."""
    from benanza.database import query
    from benanza.database.records import MeasurementLine
    from benanza.database.store import open_db
    from benanza.errors import UsageError
    from test_database import SYSTEM

    cfg = _decode()
    db = open_db(db_url)
    sid = db.upsert_system(SYSTEM)
    db.upsert_configs([cfg])

    def rec(algo, median, layout="NCHW", status="ok"):
        r = {"type": "measurement", "call": "cudnnBackendExecute", "algorithm": algo, "math": "tensor_op",
             "dtype": "float16", "cache": "warm", "status": status, "layout": layout}
        if status == "ok":
            r.update(median_ms=median, q1_ms=median, q3_ms=median, mean_ms=median, min_ms=median, max_ms=median,
                     stddev_ms=0.0, rse=0.001, samples=10, converged=True)
        else:
            r["message"] = "paged KV cache: head dims ..."
        return MeasurementLine.from_json(r)
    records = [rec("eng8_k2=1", 0.050), rec("paged_kv64:eng8_k2=1", 0.020, PAGED_KV_LAYOUT),
               rec("paged_kv64:*", None, PAGED_KV_LAYOUT, "skipped")]
    job = f"{cfg.key}.fp16"
    for _ in range(2):
        db.write_job(sid, None, job, cfg.key, "fp16", "ok", "", records, 1.0)
    rows = db.measurements(sid, [cfg.key])
    assert sorted((m.algorithm, m.layout) for m in rows) == [
        ("eng8_k2=1", "NCHW"), ("paged_kv64:*", "PAGED_KV"), ("paged_kv64:eng8_k2=1", "PAGED_KV")]
    assert next(m for m in rows if m.status == "skipped").median_ms is None
    for layouts in (("NCHW",), ("NCHW", "NHWC")):
        best = query.best_per_config(db, sid, "fp16", "warm", [cfg.key], layouts)
        assert best[cfg.key].algorithm == "eng8_k2=1" and best[cfg.key].median_ms == 0.050
    with pytest.raises(UsageError, match="NCHW and/or NHWC"):
        query.best_per_config(db, sid, "fp16", "warm", [cfg.key], ("NCHW", PAGED_KV_LAYOUT))
