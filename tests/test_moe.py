"""Mixture of experts: the experts' grouped GEMM (``GroupedGemm``, benanza's ``GroupedMatMul`` export of
``torch.nn.functional.grouped_mm``), its routing and its suite."""
from __future__ import annotations

import pytest

from benanza import kinds as L
from benanza.generation.generator import generate
from test_copy_backward import _suite_model
from test_unary_backward import syntax_check


@pytest.mark.parametrize("rows,experts,want", [
    (8, 128, (1,) * 8 + (0,) * 120),          # decode, batch 1, top-8: one row on each of 8 experts
    (4096, 8, (512,) * 8),                    # Mixtral prefill 2,048 tokens, top-2
    (10, 4, (3, 3, 2, 2)),                    # the first S % E experts get one more
])
def test_balanced_routing_spreads_rows_evenly(rows, experts, want):
    cfg = L.GroupedGemmConfig(rows=rows, n=64, k=32, experts=experts)
    assert cfg.counts() == want and sum(cfg.counts()) == rows
    assert cfg.active == sum(1 for c in want if c)
    assert cfg.flops() == 2 * rows * 64 * 32


def test_min_bytes_read_only_the_active_experts_weights():
    decode = L.GroupedGemmConfig(rows=8, n=768, k=2048, experts=128)
    # 8 of 128 experts' weights, the 8 rows in and out, 2-byte data
    assert L.REGISTRY["GroupedGemm"].min_bytes(decode, 2, 2) == 2 * (8 * 2048 + 8 * 2048 * 768) + 2 * 8 * 768


def test_a_config_refuses_a_routing_it_cannot_time():
    with pytest.raises(ValueError, match="routing"):
        L.GroupedGemmConfig(rows=8, n=8, k=8, experts=4, routing="skewed")


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    """Balanced cases carry no counts (the template computes them); a measured case carries its rows per
    expert as data, a C++ initializer list of ints."""
    cfgs = [L.GroupedGemmConfig(rows=8, n=768, k=2048, experts=128),
            L.GroupedGemmConfig(rows=10, n=64, k=32, experts=4, trans_b=True),
            L.GroupedGemmConfig(rows=10, n=64, k=32, experts=4, routing="measured", rows_per_expert=(7, 0, 1, 2))]
    generate([_suite_model(cfgs)], ["fp32", "bf16", "fp8"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "groupedgemm.cpp").read_text()
    assert src.count('8, 768, 2048, 128, false, false, "balanced", {}}') == 3
    assert src.count('10, 64, 32, 4, true, false, "balanced", {}}') == 3
    assert src.count('10, 64, 32, 4, false, false, "measured", {7, 0, 1, 2}}') == 3
    assert "cublasGemmGroupedBatchedEx(" in src
    syntax_check(tmp_path / "s", "groupedgemm.cpp")


def test_a_measured_routing_is_explicit_counts_and_balanced_keeps_its_key():
    """A measured config's counts are its own (an expert with no rows reads no weights); balanced configs
    keep the keys they were stored under (the counts field is left out at its default); counts that do
    not fit are refused."""
    m = L.GroupedGemmConfig(rows=10, n=64, k=32, experts=4, routing="measured", rows_per_expert=(7, 0, 1, 2))
    assert m.counts() == (7, 0, 1, 2) and m.active == 3
    assert L.REGISTRY["GroupedGemm"].min_bytes(m, 2, 2) == 2 * (10 * 32 + 3 * 32 * 64) + 2 * 10 * 64
    b = m.balanced()
    assert b == L.GroupedGemmConfig(rows=10, n=64, k=32, experts=4) and b.counts() == (3, 3, 2, 2)
    assert "rows_per_expert" not in b.params() and m.params()["rows_per_expert"] == [7, 0, 1, 2]
    assert m.key != b.key and L.config_from_params("GroupedGemm", m.params()) == m
    assert L.config_from_params("GroupedGemm", b.params()) == b
    for bad in ((7, 0, 1), (7, 0, 1, 1), (11, -1, 0, 0)):
        with pytest.raises(ValueError, match="measured routing needs 4 non-negative counts summing to 10"):
            L.GroupedGemmConfig(rows=10, n=64, k=32, experts=4, routing="measured", rows_per_expert=bad)
    with pytest.raises(ValueError, match="balanced routing computes"):
        L.GroupedGemmConfig(rows=10, n=64, k=32, experts=4, rows_per_expert=(7, 0, 1, 2))


# ---------------------------------------------------------------- exports as `benanza torch` writes them
#
# tests/data/decoders/<model>_{prefill,decode}.onnx: benanza's own export path (benchmarks/lm_step_exports.py,
# MOE_SPECS: PyTorch 2.13 CPU, transformers 5.25, torch.export opset 20 with benanza.processing.translations,
# weights stripped), transformers' default experts (grouped_mm), 8 experts, top-2, prefill of 16 tokens and
# decode against a cache of 32. Before the translations every one of them failed to export.

from benanza.analysis.llm import weight_bytes  # noqa: E402
from benanza.processing.model import process  # noqa: E402
from conftest import REPO  # noqa: E402

DEC = REPO / "tests" / "data" / "decoders"
#: model -> (MoE layers, hidden, expert intermediate, gate and up fused in one grouped GEMM)
MOE = {"qwen3_moe": (2, 64, 32, True), "qwen2_moe": (2, 64, 32, True), "mixtral": (2, 64, 64, True),
       "deepseek_v3_moe": (1, 64, 32, True), "deepseek_v2_moe": (1, 64, 32, True), "gpt_oss": (2, 64, 32, True)}
CASES = [(m, p) for m in MOE for p in ("prefill", "decode")]


def _grouped(ml):
    return [ly.config for ly in ml.layers if isinstance(ly.config, L.GroupedGemmConfig)]


@pytest.mark.parametrize("model,phase", CASES)
@pytest.mark.parametrize("batch", [1, 32])
def test_a_mixture_of_experts_exports_and_its_experts_are_grouped_gemms(model, phase, batch):
    """Every model's experts are the GroupedGemm kind: per MoE layer the gate/up product (n = 2 x the
    expert's intermediate) and the down product, over tokens x top-2 rows and the 8 experts."""
    ml = process(DEC / f"{model}_{phase}.onnx", batch)
    # every layer measured: the router's TopK, the sort (an int64 TopK), the histogram and the inverse
    # permutation (Scatter), the gathers and the experts' grouped GEMMs
    assert ml.unsupported() == {} and ml.coverage()["percent"] == 100.0
    layers, hidden, inter, _ = MOE[model]
    tokens = batch * (16 if phase == "prefill" else 1)
    got = sorted((c.rows, c.n, c.k, c.experts) for c in _grouped(ml))
    want = sorted([(2 * tokens, 2 * inter, hidden, 8), (2 * tokens, hidden, inter, 8)] * layers)
    assert got == want
    assert {ly.op_type for ly in ml.layers if isinstance(ly.config, L.GroupedGemmConfig)} == {"GroupedMatMul"}


@pytest.mark.parametrize("model", list(MOE))
def test_a_decode_token_reads_its_top_k_experts_weights_only(model):
    """The physical bound's weight bytes count the experts the routing gives rows to: one token reads
    2 of 8 experts; 32 tokens x top-2 = 64 rows spread over all 8 (balanced) read all 8."""
    import onnx

    path = DEC / f"{model}_decode.onnx"
    m = onnx.load(path, load_external_data=False)
    one, many = (weight_bytes(m, process(path, b), "bf16") for b in (1, 32))
    layers, hidden, inter, _ = MOE[model]
    experts = layers * 8 * (hidden * 2 * inter + inter * hidden)  # elements of every expert's weights
    assert one.parameters == many.parameters
    # the 6 experts idle at batch 1, in bf16, and the 31 more embedding rows gathered at batch 32; GPT-OSS's
    # experts' biases are gathered per (token, expert) pair (GatherND): 256 more elements read at batch 32
    bias = 2 * 256 if model == "gpt_oss" else 0
    assert many.bytes - one.bytes == 2 * experts * 6 // 8 + 2 * 31 * hidden + bias


def _timed(model, batch, ms_of):
    """An analysis-shaped record of ``model``'s decode step: each layer with ``ms_of(layer)`` (None: no valid
    measurement), the sequential sum as the layers' sum."""
    from types import SimpleNamespace

    ml = process(DEC / f"{model}_decode.onnx", batch)
    rows = [SimpleNamespace(layer=ly, time_ms=ms_of(ly)) for ly in ml.layers if ly.config is not None]
    seq = sum(r.time_ms or 0.0 for r in rows)
    return SimpleNamespace(layers=rows, fusions=[], lbl_fused_sequential_ms=seq)


def test_the_experts_share_of_a_step_is_named_with_its_routing():
    from benanza.analysis.llm import experts_share
    from benanza.reports.report import llm_answer, llm_table

    a = _timed("mixtral", 1, lambda ly: 0.05 if isinstance(ly.config, L.GroupedGemmConfig) else 0.01)
    ex = experts_share(a)
    assert ex["layers"] == 4 and ex["lbl_ms"] == pytest.approx(0.2)
    assert ex["share"] == pytest.approx(0.2 / a.lbl_fused_sequential_ms)
    assert (ex["routing"], ex["active"], ex["experts"]) == ("balanced", 8, 32)  # 2 of 8 in each of 4 products
    bound = {"limit": "memory", "bytes": 1e6, "weight_bytes": 1e6, "kv_cache_bytes": 0, "bound_ms": 0.1,
             "precision": "bf16", "ceilings": "datasheet", "gpu": "H100", "ceilings_text": "DRAM 3.35 TB/s"}
    llm = {"phase": "decode", "metric": "TPOT", "batch": 1, "lbl_ms": 1.0, "bound": bound, "experts": ex}
    text = llm_answer({"model": "mixtral", "llm": llm})
    assert f"The experts' grouped GEMMs take 0.2000 ms of it ({100 * ex['share']:.1f} % of the layers' sum, " \
           "balanced routing)." in text
    t = llm_table(llm)
    assert any("the experts (4 grouped GEMMs)" in c.plain for row in t.rows for c in row)


def test_an_unmeasured_expert_gemm_leaves_the_share_unknown_never_zero():
    from benanza.analysis.llm import experts_share

    seen = []

    def ms(ly):
        if isinstance(ly.config, L.GroupedGemmConfig):
            seen.append(ly)
            return None if len(seen) == 1 else 0.05
        return 0.01

    ex = experts_share(_timed("qwen3_moe", 8, ms))
    assert ex["lbl_ms"] is None and ex["share"] is None and ex["layers"] == 4


def test_a_dense_decoder_has_no_experts_part():
    from types import SimpleNamespace

    from benanza.analysis.llm import experts_share

    ml = process(DEC / "qwen3_lm_decode.onnx", 1)
    rows = [SimpleNamespace(layer=ly, time_ms=0.01) for ly in ml.layers if ly.config is not None]
    assert experts_share(SimpleNamespace(layers=rows, fusions=[], lbl_fused_sequential_ms=1.0)) is None


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_batched_mm_experts_are_the_gathers_and_batched_gemvs_the_export_computes(phase):
    """transformers' ``batched_mm`` experts (``?_experts_implementation=batched_mm``; before, the override
    was dropped and the default experts exported): every (token, expert) pair's weights gathered (GatherND)
    and one batched GEMV per projection; the bound reads the gathered weights, not every expert's."""
    import onnx

    path = DEC / f"qwen3_moe_batched_mm_{phase}.onnx"
    tokens = 16 if phase == "prefill" else 1
    ml = process(path, 1)
    assert not _grouped(ml) and ml.unsupported() == {}
    bmm = sorted(ly.config.describe() for ly in ml.layers if ly.op_type == "MatMul" and ly.config is not None
                 and ly.config.batch_count == 2 * tokens and ly.config.n == 1)
    assert bmm == sorted([f"Gemm({2 * tokens}xm64 n1 k64 NN)", f"Gemm({2 * tokens}xm64 n1 k32 NN)"] * 2)
    if phase == "decode":
        m = onnx.load(path, load_external_data=False)
        wb = weight_bytes(m, ml, "bf16")
        every_expert = 2 * 2 * 8 * (64 * 64 + 64 * 32)  # bf16, 2 layers, 8 experts (gate/up 64x64, down 64x32)
        assert wb.bytes <= 2 * wb.parameters - every_expert * 6 // 8  # 2 of 8 experts read at batch 1


def _ort_moe_model(path, rows=8, hidden=64, inter=32, experts=8, k=2, act="swiglu", new_layout=True, fc3=False):
    """A graph of one ONNX Runtime ``com.microsoft`` ``MoE`` node (weights stripped: shapes only), as
    ONNX Runtime GenAI's builder writes a mixture of experts."""
    import onnx
    from onnx import TensorProto, helper

    def w(name, out, inp):
        t = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT,
                             dims=[experts, out, inp] if new_layout else [experts, inp, out])
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "w.bin"), ("length", "0")):
            e = t.external_data.add()
            e.key, e.value = key, value
        return t

    fused = act == "swiglu" and not fc3
    init = [w("fc1", 2 * inter if fused else inter, hidden), w("fc2", hidden, inter)]
    ins = ["x", "probs", "fc1", "", "fc2", ""]
    if fc3:
        init.append(w("fc3", inter, hidden))
        ins += ["fc3"]
    node = helper.make_node("MoE", ins, ["y"], domain="com.microsoft", k=k, activation_type=act,
                            **({"swiglu_fusion": 1} if fused else {}))
    g = helper.make_graph([node], "ort_moe",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", hidden]),
                           helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["rows", experts])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", hidden])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                  helper.make_opsetid("com.microsoft", 1)]), str(path))
    return path


@pytest.mark.parametrize("act,new_layout,fc3", [("swiglu", True, False), ("relu", False, False),
                                                ("silu", True, True), ("gelu", False, False)])
@pytest.mark.parametrize("rows", [1, 32])
def test_onnx_runtimes_moe_op_is_its_kernels_calls(tmp_path, act, new_layout, fc3, rows):
    """ONNX Runtime's MoE contrib op: router softmax and top-k, the permutation, fc1 (and fc3) as grouped
    GEMMs, the activation, fc2, the weighted un-permutation; both weight layouts ONNX Runtime has used."""
    ml = process(_ort_moe_model(tmp_path / "m.onnx", act=act, new_layout=new_layout, fc3=fc3), rows)
    assert ml.unsupported() == {}
    kinds = [type(p).__name__ for p in (ly.config for ly in ml.layers) if p is not None]
    g = [c for c in (ly.config for ly in ml.layers) if isinstance(c, L.GroupedGemmConfig)]
    s = 2 * rows
    want = [(s, 64 if act == "swiglu" and not fc3 else 32, 64), *([(s, 32, 64)] if fc3 else []), (s, 64, 32)]
    assert [(c.rows, c.n, c.k) for c in g] == want
    assert {c.trans_b for c in g} == {new_layout} and {c.experts for c in g} == {8}
    assert kinds[:3] == ["SoftmaxConfig", "TopKConfig", "GatherConfig"] and kinds[-1] == "ReduceConfig"


def test_an_onnx_runtime_moe_with_an_unknown_activation_is_refused_with_its_reason(tmp_path):
    ml = process(_ort_moe_model(tmp_path / "m.onnx", act="softplus"), 4)
    assert list(ml.unsupported()) == ["MoE"]
    assert "activation_type 'softplus'" in next(ly.reason for ly in ml.layers if ly.op_type == "MoE")


# ------------------------------------------------- transformers' eager experts (a loop over the experts hit)
#
# tests/data/decoders/qwen3_moe_eager_{prefill,decode}.onnx: the same Qwen3-MoE with
# ?_experts_implementation=eager (benchmarks/lm_step_exports.py, PyTorch 2.13 CPU, transformers 5.17.0, weights
# stripped; torch.export refuses the data-dependent
# loop, so the TorchScript exporter traced it at batch 2): the prefill trace hit 8 and 7 of the 8 experts
# of its two MoE layers, the decode trace (2 tokens x top-2) 4 and 4. Each expert's rows are a NonZero's
# length, bound to balanced routing (benanza.processing.routing).

#: phase -> experts the trace hit per MoE layer
EAGER_TRACED = {"prefill": (8, 7), "decode": (4, 4)}


def _eager(phase, batch):
    return process(DEC / f"qwen3_moe_eager_{phase}.onnx", batch)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("batch", [1, 32])
def test_eager_experts_are_fully_measured_and_grouped(phase, batch):
    """Every layer measured (before: 32-62 %, no expert GEMM), the router's TopK and the index ops
    (OneHot, the int64 ReduceSum of the mask, NonZero) among them; per MoE layer and projection the
    traced experts' MatMuls, with their weight slices, are one GroupedGemm candidate over the rows the
    balanced routing gives the traced experts."""
    ml = _eager(phase, batch)
    assert ml.unsupported() == {} and ml.coverage()["percent"] == 100.0
    ops = {ly.op_type for ly in ml.benchmarked()}
    assert {"TopK", "OneHot", "ReduceSum", "NonZero", "ScatterElements", "MatMul"} <= ops
    tokens = batch * (16 if phase == "prefill" else 1)
    every = L.GroupedGemmConfig(rows=2 * tokens, n=1, k=1, experts=8).counts()
    groups = sorted((f.config.rows, f.config.n, f.config.k, f.config.experts, f.config.routing, f.config.trans_b)
                    for f in ml.fusions if isinstance(f.config, L.GroupedGemmConfig))
    want = []
    for traced in EAGER_TRACED[phase]:
        given = [c for c in every[:traced] if c]  # the traced experts the routing gives rows
        want += [(sum(given), 64, 64, len(given), "balanced", True), (sum(given), 64, 32, len(given), "balanced", True)]
    assert groups == sorted(want)
    assert sum(1 for f in ml.fusions if isinstance(f.config, L.SdpaConfig)) == 2  # each layer's attention


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_eager_routing_is_stated_in_the_configs_and_the_notice(phase):
    """The NonZero layers say the routing that sets their length; the notice names the experts traced of
    all and the rows the LBL counts: prefill at batch 1 has 16 x 2 rows per layer over 8 experts (4
    each), its second layer traced 7 experts, so 4 rows are not in the graph."""
    ml = _eager(phase, 1)
    nz = [ly.config for ly in ml.benchmarked() if isinstance(ly.config, L.NonZeroConfig)]
    assert nz and {c.routing for c in nz} == {"balanced"}
    notice = next(n for n in ml.notices if n.startswith("eager export:"))
    traced = EAGER_TRACED[phase]
    assert notice.startswith(f"eager export: {sum(traced)} of 16 experts traced ("
                             f"{traced[0]} of 8, {traced[1]} of 8 in 2 MoE layers")
    assert "balanced routing" in notice
    if phase == "prefill":
        assert "the LBL counts the traced experts' 60 of 64 rows: the other 4 rows' experts are not in the graph" \
            in notice
    else:  # one token's top-2: 2 of the 4 traced experts get a row, the other 2 bodies are skipped
        assert "4 traced experts get no rows" in notice and "the LBL counts all 4 rows" in notice
        skipped = [ly for ly in ml.layers if ly.reason == "an expert the routing gives no rows: the loop skips it"]
        assert {ly.op_type for ly in skipped} == {"Gather", "Transpose"} and len(skipped) == 2 * 2 * 2 * 2


def test_eager_decode_reads_the_weights_of_the_experts_it_runs():
    """The bound and the LBL see the same experts: at batch 1 the two experts given rows per layer (the
    skipped bodies' weight slices are not read), as the default form's top-2; at batch 32 the 4 traced of
    the 8 experts the routing gives rows (the other 4 are not in the graph, and the notice says so)."""
    import onnx

    path = DEC / "qwen3_moe_eager_decode.onnx"
    m = onnx.load(path, load_external_data=False)
    expert = 64 * 64 + 64 * 32  # one expert's gate/up and down weights (elements)
    one, many = (weight_bytes(m, _eager("decode", b), "bf16") for b in (1, 32))
    assert many.bytes - one.bytes == 2 * (2 * 2 * expert + 31 * 64)  # 2 more experts per layer, 31 embedding rows
    grouped = weight_bytes(onnx.load(DEC / "qwen3_moe_decode.onnx", load_external_data=False),
                           process(DEC / "qwen3_moe_decode.onnx", 1), "bf16")
    assert abs(one.bytes - grouped.bytes) < 2 * expert // 16  # the same 2 experts per layer as the grouped form


def test_the_routing_binds_only_an_eager_experts_loop():
    """The other forms have no loop to bind: no notice, no NonZero."""
    for name in ("qwen3_moe_prefill", "qwen3_moe_batched_mm_decode", "qwen3_lm_decode"):
        ml = process(DEC / f"{name}.onnx", 4)
        assert not any(n.startswith("eager export:") for n in ml.notices)
        assert not any(isinstance(ly.config, L.NonZeroConfig) for ly in ml.layers)


def test_the_index_ops_suites_render_and_compile(tmp_path):
    """NonZero (CUB's select), the int64 ReduceSum (CUB's segmented reduction) and OneHot (a scatter)
    of the eager prefill: their sources render with the routing named and compile."""
    from benanza.kinds.nonzero import NonZeroConfig
    from benanza.kinds.reduce import ReduceConfig

    cfgs = [NonZeroConfig(x=(2, 16), count=4, routing="balanced"), NonZeroConfig(x=(8,), count=8),
            ReduceConfig(op="sum", x=(8, 2, 16), y=(8, 1, 1), dtype="int64"),
            ReduceConfig(op="mean", x=(4, 64), y=(4, 1))]
    generate([_suite_model(cfgs)], ["bf16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "nonzero.cpp").read_text()
    assert '2, {2, 16, 1, 1, 1, 1, 1, 1}, 32, 4, IndexType::B8, "NonZero bool balanced"}' in src
    assert "nonzero(x, c.n" in src
    red = (tmp_path / "s" / "src" / "reduce.cpp").read_text()
    assert "CUDNN_REDUCE_TENSOR_ADD, true, true, 8, 32, ReduceOp::Sum}" in red and "reduce_int_rows(" in red
    for f in ("nonzero.cpp", "reduce.cpp"):
        syntax_check(tmp_path / "s", f)


def test_one_hot_is_pytorchs_zeros_and_scatter(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Constant", [], ["depth"], value=helper.make_tensor("d", TensorProto.INT64, [], [8])),
             helper.make_node("Constant", [], ["vals"], value=helper.make_tensor("v", TensorProto.INT64, [2], [0, 1])),
             helper.make_node("OneHot", ["ids", "depth", "vals"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "oh", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", 2])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, ["n", 2, 8])])
    path = tmp_path / "oh.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    (ly,) = process(path, 16).layers
    assert ly.config == L.ScatterConfig(op="ScatterElements", data=(16, 2, 8), indices=(16, 2, 1),
                                        updates=(16, 2, 1), axis=2, dtype="int64")


def test_an_integer_reduction_over_leading_dims_is_refused_with_its_reason():
    from benanza.kinds.reduce import ReduceConfig

    with pytest.raises(ValueError, match="trailing dims"):
        ReduceConfig(op="sum", x=(8, 16), y=(1, 16), dtype="int64")
    with pytest.raises(ValueError, match="trailing dims"):
        ReduceConfig(op="mean", x=(8, 16), y=(8, 1), dtype="int64")


def test_an_int64_clip_is_the_unary_kernels_integer_clamp(tmp_path):
    """Clip of int64 data (an expert or position index clamped to its range): the unary kernel's integer
    math, bounds kept; another activation of integer data stays refused with its reason."""
    import onnx
    from onnx import TensorProto, helper

    def model(op, path):
        consts = [helper.make_node("Constant", [], [n], value=helper.make_tensor(n, TensorProto.INT64, [], [v]))
                  for n, v in (("lo", 0), ("hi", 7))]
        ins = ["x", "lo", "hi"] if op == "Clip" else ["x"]
        g = helper.make_graph(consts + [helper.make_node(op, ins, ["y"])], "c",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, ["n", 2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, ["n", 2])])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return path

    (ly,) = process(model("Clip", tmp_path / "c.onnx"), 16).layers
    assert ly.config == L.UnaryConfig(shape=(16, 2), op="clip", alpha=0.0, beta=7.0, src="int64", dst="int64")
    (ly,) = process(model("Relu", tmp_path / "r.onnx"), 16).layers
    assert ly.status == "unsupported" and "INT64 is not float" in ly.reason


def test_the_eager_experts_share_is_their_groups_time():
    """An eager loop's experts are fusion groups, not GroupedGemm layers: their share counts each group at
    its time in the fused sequential LBL (the grouped GEMM where faster, else the loop's layers)."""
    from types import SimpleNamespace

    from benanza.analysis.llm import experts_share

    ml = _eager("decode", 32)
    groups = [f for f in ml.fusions if isinstance(f.config, L.GroupedGemmConfig)]
    fts = [SimpleNamespace(config=f.config, fused_ms=0.01 * (i + 1), unfused_ms=0.02, faster_than_sum=i == 0)
           for i, f in enumerate(groups)]
    rows = [SimpleNamespace(layer=ly, time_ms=0.001) for ly in ml.layers if ly.config is not None]
    ex = experts_share(SimpleNamespace(layers=rows, fusions=fts, lbl_fused_sequential_ms=1.0))
    assert ex["layers"] == 4 and ex["lbl_ms"] == pytest.approx(0.01 + 3 * 0.02)
    assert (ex["routing"], ex["active"], ex["experts"]) == ("balanced", 16, 16)
    fts[1].unfused_ms = None
    assert experts_share(SimpleNamespace(layers=rows, fusions=fts, lbl_fused_sequential_ms=1.0))["lbl_ms"] is None
