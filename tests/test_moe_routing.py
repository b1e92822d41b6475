"""The routing an MoE layer is timed under is a scenario value (issue 54, item 1): the routing the run's own
inputs give (recorded by `benanza torch` in the export's metadata, ``benanza.routing``), with balanced as the
what-if; without recorded counts the experts stay balanced and the report says so.

tests/data/decoders/qwen3_moe_routed_prefill.onnx: the Qwen3-MoE prefill of test_moe.py (8 experts, top-2, 2
MoE layers, 16 tokens; benchmarks/lm_step_exports.py, PyTorch 2.13 CPU, transformers 5.17) with its routing
recorded by benanza.profiles.pytorch.record_routing on the CPU in fp32 at batches 1 and 4. At batch 1 the
second layer's router gives expert 3 no rows.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import onnx
import pytest

from benanza import kinds as L
from benanza.analysis.llm import weight_bytes, with_balanced_experts
from benanza.errors import ModelError
from benanza.processing.model import process
from benanza.processing.routing import ROUTING_KEY, balanced_twins, stored_routing, write_routing
from conftest import HERE, REPO, run_fake_suite, scenario_of

DEC = HERE / "data" / "decoders"
ROUTED = DEC / "qwen3_moe_routed_prefill.onnx"
#: the counts the recording stored at batch 1, per MoE layer (16 tokens x top-2 = 32 rows each)
BATCH1 = ((3, 3, 1, 6, 3, 4, 3, 9), (1, 12, 5, 0, 8, 1, 2, 3))


def _grouped(ml):
    return [ly for ly in ml.layers if isinstance(ly.config, L.GroupedGemmConfig)]


def _note(ml):
    (note,) = [n for n in ml.notices if n.startswith("routing:")]
    return note


def test_the_export_carries_the_routers_counts_and_the_configs_take_them():
    doc = stored_routing(onnx.load(str(ROUTED), load_external_data=False))
    assert doc["format"] == 1 and sorted(doc["batches"]) == ["1", "4"] and (doc["device"], doc["dtype"]) == ("cpu", "fp32")
    ml = process(ROUTED, 1)
    got = [(ly.config.routing, ly.config.counts()) for ly in _grouped(ml)]
    # gate/up and down of each layer share the layer's routing
    assert got == [("measured", BATCH1[0])] * 2 + [("measured", BATCH1[1])] * 2
    assert [ly.config.active for ly in _grouped(ml)] == [8, 8, 7, 7]
    note = _note(ml)
    assert note.startswith("routing: measured: the router's per-expert counts on the run's own inputs (batch 1")
    assert note.endswith("4 of 4 grouped GEMMs in 2 MoE layers; experts given rows per layer 8/8, 7/8")
    # the balanced twins are timed too (the what-if), beside the measured configs
    twins = balanced_twins(ml.benchmarked())
    assert [c.routing for c in twins] == ["balanced"] * 4 and all(c.counts() == (4,) * 8 for c in twins)
    assert {c.key for c in twins} <= set(ml.unique_configs())
    big = process(ROUTED, 4)
    assert [sum(ly.config.counts()) for ly in _grouped(big)] == [128] * 4
    assert all(ly.config.routing == "measured" for ly in _grouped(big))


def test_without_recorded_counts_the_experts_stay_balanced_and_say_so():
    plain = process(DEC / "qwen3_moe_prefill.onnx", 1)
    assert {ly.config.routing for ly in _grouped(plain)} == {"balanced"} and not balanced_twins(plain.layers)
    assert _note(plain).startswith("routing: balanced: no routing recorded")
    other = process(ROUTED, 2)  # a batch the recording did not run
    assert {ly.config.routing for ly in _grouped(other)} == {"balanced"}
    assert _note(other) == "routing: balanced: the routing was recorded at batches 1, 4, not at batch 2"


def test_the_bound_reads_the_weights_of_the_experts_given_rows():
    """At batch 1 the second layer's expert 3 gets no rows: the measured bound reads one expert's gate/up
    (64 x 64) and down (64 x 32) weights fewer than the balanced what-if (all 8 experts of both layers)."""
    m = onnx.load(str(ROUTED), load_external_data=False)
    ml = process(ROUTED, 1)
    measured, balanced = weight_bytes(m, ml, "bf16"), weight_bytes(m, with_balanced_experts(ml), "bf16")
    assert balanced.bytes - measured.bytes == 2 * (64 * 64 + 64 * 32)
    assert with_balanced_experts(process(DEC / "qwen3_moe_prefill.onnx", 1)) is None


def _with_routing(tmp_path, doc):
    path = tmp_path / "routed.onnx"
    shutil.copy(ROUTED, path)
    if isinstance(doc, str):  # a raw value
        m = onnx.load(str(path), load_external_data=False)
        next(p for p in m.metadata_props if p.key == ROUTING_KEY).value = doc
        onnx.save(m, str(path))
    else:
        write_routing(path, doc)
    return path


def _doc(**change):
    doc = stored_routing(onnx.load(str(ROUTED), load_external_data=False))
    entry = doc["batches"]["1"][1]
    entry.update(change)
    return doc


@pytest.mark.parametrize("doc,message", [
    ("{not json", "metadata benanza.routing: not JSON"),
    ({"format": 9, "batches": {}}, "not format 1"),
    (_doc(counts=[1, 12, 5, 0, 8, 1, 2, 4]), "batch 1: model.model.layers.1.mlp.experts: 8 counts summing to 33; its 8 "
                                             "experts and 16 tokens x top-2 need 8 summing to 32"),
    (_doc(counts=[1, 12, 5, 0, 8, 1, -2, 7]), "model.model.layers.1.mlp.experts: experts, top_k and tokens must be"),
    (_doc(tokens=8, counts=[1, 2, 3, 0, 4, 1, 2, 3]),
     "layer node_grouped_mm_fallback_2 (model.model.layers.1.mlp.experts): the recorded routing gives 16 rows over "
     "8 experts; the layer has 32 rows over 8 experts"),
])
def test_bad_recorded_counts_are_one_clear_error_naming_the_layer(tmp_path, doc, message):
    path = _with_routing(tmp_path, doc)
    with pytest.raises(ModelError, match="^" + str(path).replace(".", r"\.")) as e:
        process(path, 1)
    assert message in str(e.value) and "\n" not in str(e.value)
    r = subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", "layers", str(path),
                        "--batch", "1"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode != 0 and r.stderr.strip().startswith("benanza: ") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_the_report_and_json_name_the_routing_and_the_balanced_what_if(tmp_path, db_url):
    """Measured by the fake suite (its times a hash of each job: the measured and balanced configs differ):
    the LBL takes the measured routing, `llm.experts` names it with each layer's experts given rows and the
    balanced what-if (its LBL, its experts' time and its physical bound), and the terminal table prints it."""
    folder = run_fake_suite([process(ROUTED, 1)], ["bf16"], tmp_path / "s", db_url)
    src = (folder / "src" / "groupedgemm.cpp").read_text()
    assert '"measured", {1, 12, 5, 0, 8, 1, 2, 3}}' in src and '"balanced", {}}' in src
    args = [sys.executable, "-c", "from benanza.cli import main; main()", "analyze", str(ROUTED), "--batch", "1",
            "--dtype", "bf16", "--db", db_url]
    r = subprocess.run(args + ["--json"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    d = scenario_of(r.stdout, "analyze")
    ex = d["llm"]["experts"]
    assert ex["routing"] == "measured" and ex["routing_note"].startswith("measured: the router's per-expert counts")
    assert [(p["routing"], p["active"], p["experts"], p["rows"]) for p in ex["per_layer"]] == \
        [("measured", 8, 8, 32)] * 2 + [("measured", 7, 8, 32)] * 2
    wi = ex["whatif"]
    assert wi["routing"] == "balanced" and (wi["active"], wi["experts"]) == (32, 32) and ex["active"] == 30
    assert wi["lbl_ms"] > 0 and wi["experts_ms"] > 0 and wi["lbl_ms"] != pytest.approx(d["llm"]["lbl_ms"])
    # the what-if moves the LBL by the experts' difference (their layers are on the one chain of the step)
    assert wi["lbl_ms"] - d["llm"]["lbl_ms"] == pytest.approx(wi["experts_ms"] - ex["lbl_ms"], rel=1e-6, abs=1e-9)
    assert wi["weight_bytes"] - d["llm"]["bound"]["weight_bytes"] == 2 * (64 * 64 + 64 * 32)
    json.dumps(d)  # the document stays JSON
    r = subprocess.run(args + ["--no-layers"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "what-if: balanced routing (LBL)" in r.stdout and "measured routing, 30 of 32 experts given rows" in r.stdout
    assert "experts' routing: measured: the router's per-expert counts" in " ".join(r.stdout.split())
    from benanza.reports.report import llm_answer

    assert f"Under balanced routing (what-if) the lower bound is {wi['lbl_ms']:.4f} ms, the experts " \
           f"{wi['experts_ms']:.4f} ms." in llm_answer(d)


def test_benanza_torch_records_only_what_it_lacks():
    """`benanza torch`'s recording step (benanza.profiles.pytorch.record_routing) runs no forward for a model
    without grouped experts, nor for batches already recorded on the same device and dtype (no torch needed
    for either): it returns None, or the record it found."""
    from benanza.profiles.pytorch import record_routing

    assert record_routing(None, DEC / "qwen3_lm_prefill.onnx", [1], "bf16", "cuda") is None
    assert record_routing(None, DEC / "qwen3_moe_eager_prefill.onnx", [1], "bf16", "cuda") is None  # no GroupedMatMul
    found = record_routing(None, ROUTED, [4, 1], "fp32", "cpu")
    assert found == stored_routing(onnx.load(str(ROUTED), load_external_data=False))


def test_a_training_steps_expert_gradients_keep_the_measured_routing():
    """The grouped GEMMs' data and weight gradients are timed under the forward's routing: the same counts,
    the idle expert 3 of the second layer included (its dW is zeros, its weights are not read)."""
    from benanza.processing.training import training_plan

    ml = process(ROUTED, 1)
    plan = training_plan(ml)
    grads = [c.config for c in plan.calls if isinstance(c.config, L.GroupedGemmConfig)]
    assert len(grads) == 8 and sum(c.weight_grad for c in grads) == 4
    # autograd's order: the second layer's experts first
    assert [(c.routing, c.counts()) for c in grads] == [("measured", BATCH1[1 - i // 4]) for i in range(8)]
    assert [c.active for c in grads] == [7] * 4 + [8] * 4
