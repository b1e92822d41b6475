"""The golden cases: every ``benanza`` command that runs without a GPU, on the shipped reference
databases (db/reference/*.sqlite.gz) and the models in the repository, with the exact scenarios of
issue 52's "Wrong answers by default" (each such case names its defect in ``defect``). Each records
today's bytes; the refactor of issue 52 must leave them unchanged except where a commit names the
defect it fixes.

Not covered, and why: ``bench``, ``build``, ``run``, ``ceilings``, ``worker`` and ``profile``
without ``--from`` need a GPU, minutes of CUDA compiling or a cluster (``ceilings``/``bench`` without
a GPU compile the harness for ~4 minutes first); ``torch`` needs PyTorch and a GPU (its errors
without torchvision or transformers are recorded, skipped where those are installed); ``system``
describes this machine's devices; ``db upgrade`` writes into a database; the HTML reports
(``--html``) are recorded by existence and file mode only. Every command's ``--help`` is recorded.
"""
from __future__ import annotations

from harness import NUMBERED, Case, Step, case

H200 = "db/reference/h200.sqlite.gz"
PAIR = "db/reference/h100_h200_fp16.sqlite.gz"
PART = "db/reference/h100_partitions.sqlite.gz"
TRUTH = "db/reference/h200_truth.sqlite.gz"

R50 = "examples/resnet50.onnx"
ZOO = "tests/data/zoo/models"
BNKEPT = f"{ZOO}/resnet50_bnkept.onnx"
REF = "db/reference/truth"
DEC = "tests/data/decoders"
NATIVE = "tests/data/h200_native"
PROFILES = "tests/data/h200_profiles"
TRACES = "tests/data/traces"

B32_FP16 = ("-b", "32", "-t", "fp16")

#: an ISO date and time (the export's context.date), the only clock in an output
DATE = (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", "<DATE>")
#: matplotlib's SVG ids of clip paths (p...) and markers (m...) are random per run: numbered instead
SVG_IDS = (r'(id="|#)([mp])[0-9a-f]{10}\b', NUMBERED)
#: `db import` prints its rate
RATE = (r"; \d+ rows/s", "; <N> rows/s")

CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# ------------------------------------------------------------------------------------ help and usage

SUBCOMMANDS = ("layers", "generate", "build", "run", "analyze", "report", "predict", "roofline", "bench",
               "worker", "ceilings", "system", "profile", "torch")
DB_SUBCOMMANDS = ("systems", "query", "shared", "compare", "export", "import", "upgrade")

add(case("help", "--help"),
    case("bare", defect="a bare `benanza` prints its whole help as one error line"),
    case("version", "--version"),
    case("db-bare", "db", defect="a bare `benanza db` prints its whole help as one error line (as bare `benanza`)"),
    case("db-help", "db", "--help"))
add(*(case(f"help-{c}", c, "--help") for c in SUBCOMMANDS))
add(*(case(f"help-db-{c}", "db", c, "--help") for c in DB_SUBCOMMANDS))
add(case("help-wide", "analyze", "--help", env={"COLUMNS": "160"}, note="click wraps help to COLUMNS"))

# usage errors: one line, exit 2
add(case("err-unknown-command", "nosuch"),
    case("err-unknown-option", "layers", R50, "--nosuch"),
    case("err-missing-model", "layers"),
    case("err-no-such-model", "layers", "nosuch.onnx"),
    case("err-bad-batch", "layers", R50, "-b", "x"),
    case("err-bad-dtype", "analyze", R50, "-t", "fp64", "--db", H200),
    case("err-bad-layout", "analyze", R50, "--layout", "nwhc", "--db", H200),
    case("err-bad-cache", "analyze", R50, "--cache", "lukewarm", "--db", H200),
    case("err-bad-dim", "layers", R50, "--dim", "seq"),
    case("err-no-such-db", "analyze", R50, "--db", "nosuch.sqlite"),
    case("err-no-such-system", "analyze", R50, "--db", H200, "--system", "A100"),
    case("err-trace-folder", "analyze", R50, "--db", H200, "--trace", "{tmp}"),
    case("err-svg-no-folder", "roofline", R50, "--db", H200, "--svg", "{tmp}/nosuch/r.svg"),
    case("err-predict-unknown-gpu", "predict", R50, "--db", H200, "--to", "Z9000"),
    case("err-predict-ambiguous-gpu", "predict", R50, "--db", H200, "--to", "H100"),
    case("err-predict-optimizer-without-train", "predict", R50, "--db", H200, "--to", "h100-sxm", "--optimizer", "adam",
         defect="--optimizer without --train is an error only in predict"),
    case("err-analyze-optimizer-without-train", "analyze", R50, "--db", H200, "--optimizer", "adam", "--no-layers",
         defect="--optimizer without --train is an error only in predict (accepted here)"),
    case("err-html-without-profile", "analyze", R50, "--db", H200, "--html", "{tmp}/x.html"),
    case("err-report-missing", "report", "{tmp}/missing.json"),
    case("err-compare-nothing-common", "db", "compare", "1", "2", "--db", PAIR, "--dtype", "fp32"),
    case("err-gz-db-write", "db", "export", "--db", H200, "-o", "{tmp}/x.sqlite", "--format", "nosuch"))

# ------------------------------------------------------------------------------------------- layers

add(case("layers-resnet50", "layers", R50),
    case("layers-resnet50-details", "layers", R50, "--details"),
    case("layers-resnet50-json", "layers", R50, "--json"),
    case("layers-bnkept", "layers", BNKEPT, "-b", "32"),
    case("layers-googlenet-details", "layers", f"{ZOO}/googlenet.onnx", "--details"),
    case("layers-lstm-b32", "layers", f"{ZOO}/lstm_lm.onnx", "-b", "32"),
    case("layers-mobilenet-v2", "layers", f"{ZOO}/mobilenet_v2.onnx"),
    case("layers-vit-fixed", "layers", "tests/data/vit_b_16_fixed1.onnx"),
    case("layers-mobilenet-v3", "layers", "tests/data/mobilenet_v3_large.onnx"),
    case("layers-resnet18-train", "layers", f"{REF}/resnet18_train.onnx", "-b", "2"),
    case("layers-gpt2-prefill-unbound", "layers", f"{DEC}/gpt2_prefill_dynamo20.onnx"),
    case("layers-gpt2-prefill", "layers", f"{DEC}/gpt2_prefill_dynamo20.onnx", "--dim", "seq=128"),
    case("layers-gpt2-decode-json", "layers", f"{DEC}/gpt2_decode_torchscript.onnx", "--json", "--dim", "past=512"),
    case("layers-llama-decode-unbound", "layers", f"{DEC}/llama_decode_dynamo23.onnx"),
    case("layers-llama-prefill", "layers", f"{DEC}/llama_prefill_dynamo23.onnx", "--dim", "seq=256", "--details"),
    case("layers-phi3-prefill", "layers", f"{DEC}/phi3_prefill_dynamo23.onnx", "--dim", "seq=64"))

# ------------------------------------------------------------------------------------------ analyze

add(case("analyze-readme-quickstart", "analyze", R50, "--batch", "32", "--dtype", "fp16", "--db", TRUTH,
         note="README.md's quick-start command, the per-layer table included"),
    case("analyze-dbreadme-first-example", "analyze", R50, "--batch", "32", "--dtype", "fp16", "--db", H200,
         defect="db/README.md's first example uses the legacy h200.sqlite.gz (3.30 ms) where the README's own "
                "command gives 1.2304 ms"),
    case("analyze-h200-b1-fp32", "analyze", R50, "--db", H200, "--no-layers"),
    case("analyze-h200-b1-32-all-dtypes", "analyze", R50, "-b", "1,32", "-t", "fp32,tf32,fp16", "--db", H200,
         "--no-layers"),
    case("analyze-h200-vgg16-json", "analyze", f"{REF}/vgg16.onnx", *B32_FP16, "--db", H200, "--json"),
    case("analyze-h200-nchw", "analyze", R50, *B32_FP16, "--db", H200, "--layout", "nchw", "--no-layers"),
    case("analyze-h200-cold", "analyze", R50, *B32_FP16, "--db", H200, "--cache", "cold", "--no-layers",
         defect="--cache cold output never says cold"),
    case("analyze-h200-vgg16-b32-tf32", "analyze", f"{REF}/vgg16.onnx", "-b", "32", "-t", "tf32", "--db", H200),
    case("analyze-h200-googlenet-trace", "analyze", f"{ZOO}/googlenet.onnx", *B32_FP16, "--db", H200,
         "--no-layers", "--trace", "{tmp}/lbl.json", files=(("lbl.json", "text"),)),
    case("analyze-h200-bnkept-b1-fp32", "analyze", BNKEPT, "--db", H200),
    case("analyze-truth-resnet50-b32-fp16-json", "analyze", R50, *B32_FP16, "--db", TRUTH, "--json"),
    case("analyze-truth-trace", "analyze", R50, *B32_FP16, "--db", TRUTH, "--no-layers", "--trace",
         "{tmp}/lbl.json", files=(("lbl.json", "text"),)),
    case("analyze-truth-conv-tf32", "analyze", f"{REF}/resnet50.onnx", "-b", "32", "-t", "fp32", "--conv-tf32",
         "--db", TRUTH, "--no-layers"),
    case("analyze-truth-fp32-no-conv-tf32", "analyze", f"{REF}/resnet50.onnx", "-b", "32", "-t", "fp32", "--db",
         TRUTH, "--no-layers"),
    case("analyze-truth-vit", "analyze", f"{REF}/vit_b_16.onnx", *B32_FP16, "--db", TRUTH),
    case("analyze-truth-bert", "analyze", f"{REF}/bert_base.onnx", *B32_FP16, "--db", TRUTH, "--no-layers"),
    case("analyze-truth-lstm", "analyze", f"{REF}/lstm_lm.onnx", "-b", "1,32", "-t", "fp16", "--db", TRUTH),
    case("analyze-truth-many-models", "analyze", f"{REF}/mobilenet_v3_large.onnx", "-b", "1,32", "-t", "fp16",
         "--db", TRUTH, "--no-layers"),
    case("analyze-truth-efficientnet", "analyze", f"{REF}/efficientnet_b0.onnx", *B32_FP16, "--db", TRUTH,
         "--no-layers"),
    case("analyze-truth-train", "analyze", f"{REF}/resnet18_train.onnx", "-b", "32", "-t", "fp16", "--train",
         "--db", TRUTH, "--no-layers", defect="analyze --train prints 0.0000 for an unmeasured phase"),
    case("analyze-truth-train-json", "analyze", f"{REF}/alexnet_train.onnx", "-b", "32", "-t", "fp16", "--train",
         "--optimizer", "adam", "--db", TRUTH, "--json"),
    case("analyze-truth-unmeasured-model", "analyze", f"{ZOO}/alexnet.onnx", "-b", "8", "--db", TRUTH,
         "--no-layers", note="a batch nobody measured: an incomplete LBL"),
    case("analyze-gpt2-prefill-dim", "analyze", f"{DEC}/gpt2_prefill_dynamo20.onnx", "--dim", "seq=128", "-t", "fp16",
         "--db", TRUTH, "--no-layers"))

# the partitions: an exact GPU name, a family name and no --system pick the [32 SMs] partition
P = ("analyze", R50, *B32_FP16, "--db", PART)
PDEF = "--system \"NVIDIA H100 80GB HBM3\", --system H100 and no --system pick the [32 SMs] partition"
add(case("part-r50-b32-fp16-nosystem", *P, defect=PDEF),
    case("part-r50-b32-fp16-exact-name", *P, "--system", "NVIDIA H100 80GB HBM3", "--no-layers", defect=PDEF),
    case("part-r50-b32-fp16-H100", *P, "--system", "H100", "--no-layers", defect=PDEF),
    case("part-r50-b32-fp16-32sms", *P, "--system", "NVIDIA H100 80GB HBM3 [32 SMs]", "--no-layers"),
    case("part-r50-b32-fp16-64sms", *P, "--system", "NVIDIA H100 80GB HBM3 [64 SMs]", "--no-layers"),
    case("part-r50-b32-fp16-id1", *P, "--system", "1", "--no-layers"),
    case("part-r50-b32-fp16-fingerprint", *P, "--system", "693cd9af", "--no-layers"),
    case("part-resnet18-train-nosystem", "analyze", f"{REF}/resnet18_train.onnx", "-b", "32", "-t", "fp16", "--train",
         "--db", PART, "--no-layers", defect=PDEF + " (the issue's resnet18 training step 9.01 against 2.82 ms)"),
    case("part-resnet18-train-id1", "analyze", f"{REF}/resnet18_train.onnx", "-b", "32", "-t", "fp16", "--train",
         "--db", PART, "--system", "1", "--no-layers"),
    case("part-bert-fp32", "analyze", f"{REF}/bert_base.onnx", "-b", "32", "--db", PART, "--system", "1",
         "--no-layers"),
    case("part-squeezenet-b1", "analyze", f"{REF}/squeezenet1_1.onnx", "-t", "fp16", "--db", PART, "--system",
         "NVIDIA H100 80GB HBM3 [64 SMs]"))

# the pair: the H100 has no NHWC convolution rows
add(case("pair-bnkept-H100", "analyze", BNKEPT, *B32_FP16, "--db", PAIR, "--system", "H100",
         defect="h100_h200_fp16: the H100 has 0 NHWC convolution rows, yet analyze --system H100 prints "
                "\"nchw+nhwc, complete yes\" (3.40 ms)"),
    case("pair-bnkept-H200", "analyze", BNKEPT, *B32_FP16, "--db", PAIR, "--system", "H200", "--no-layers"),
    case("pair-bnkept-H100-nchw", "analyze", BNKEPT, *B32_FP16, "--db", PAIR, "--system", "H100", "--layout", "nchw",
         "--no-layers"),
    case("pair-bnkept-nosystem", "analyze", BNKEPT, *B32_FP16, "--db", PAIR, "--no-layers"),
    case("pair-lstm-nosystem-json", "analyze", f"{ZOO}/lstm_lm.onnx", "-b", "32", "-t", "fp16", "--db", PAIR, "--json"),
    case("pair-densenet-b1-H200", "analyze", f"{ZOO}/densenet121.onnx", "-t", "fp16", "--db", PAIR, "--system",
         "NVIDIA H200", "--no-layers"),
    case("pair-lstm-H100", "analyze", f"{ZOO}/lstm_lm.onnx", "-b", "1,32", "-t", "fp16", "--db", PAIR, "--system",
         "H100"))

# insights: analyze --profile on the recorded profiles, report on its JSON
add(case("insights-native-resnet50", "analyze", f"{NATIVE}/resnet50-b32-fp16/model.onnx", *B32_FP16, "--db", TRUTH,
         "--profile", f"{NATIVE}/resnet50-b32-fp16",
         defect="the insights count \"159 batch norms\" for resnet50 (53) and label iteration-summed kernel "
                "counts \"per inference\""),
    case("insights-native-resnet50-json", "analyze", f"{NATIVE}/resnet50-b32-fp16/model.onnx", *B32_FP16, "--db",
         TRUTH, "--profile", f"{NATIVE}/resnet50-b32-fp16", "--json",
         defect="the insights count \"159 batch norms\" for resnet50 (53)"),
    case("insights-bnkept-truth", "analyze", BNKEPT, *B32_FP16, "--db", TRUTH, "--profile",
         f"{PROFILES}/resnet50_bnkept-b32-fp16"),
    case("insights-bnkept-pair-cl", "analyze", BNKEPT, "-t", "fp16", "--db", PAIR, "--system", "NVIDIA H200",
         "--profile", f"{PROFILES}/resnet50_bnkept-b32-fp16-cl", "--no-layers"),
    case("insights-bnkept-pair-cl-nchw", "analyze", BNKEPT, "-t", "fp16", "--db", PAIR, "--system", "NVIDIA H200",
         "--profile", f"{PROFILES}/resnet50_bnkept-b32-fp16-cl", "--layout", "nchw", "--no-layers"),
    case("insights-wrong-model", "analyze", R50, *B32_FP16, "--db", TRUTH, "--profile",
         f"{PROFILES}/resnet50_bnkept-b32-fp16"),
    Case("report-two", (
        Step(("analyze", BNKEPT, *B32_FP16, "--db", TRUTH, "--profile", f"{PROFILES}/resnet50_bnkept-b32-fp16",
              "--json"), save="a.json", record=False),
        Step(("analyze", BNKEPT, "-t", "fp16", "--db", PAIR, "--system", "NVIDIA H200", "--profile",
              f"{PROFILES}/resnet50_bnkept-b32-fp16-cl", "--json"), save="b.json", record=False),
        Step(("report", "{tmp}/a.json", "{tmp}/b.json")),
        Step(("report", "{tmp}/a.json", "{tmp}/b.json", "--html", "{tmp}/c.html"))),
        files=(("c.html", "mode"),), defect="report files are written mode 0600"),
    Case("report-native", (
        Step(("report", f"{NATIVE}/resnet50-b32-fp16/report.json", f"{NATIVE}/vit_b_16-b32-fp16/report.json",
              f"{NATIVE}/bert-b32-fp16/report.json")),),
         note="the insights documents `benanza torch` wrote on the H200"),
    Case("report-not-analyze-json", (
        Step(("layers", R50, "--json"), save="l.json", record=False),
        Step(("report", "{tmp}/l.json")))))

# ----------------------------------------------------------------------------------------- roofline

add(case("roofline-truth-r50-b32-fp16", "roofline", R50, *B32_FP16, "--db", TRUTH,
         defect="22 of 121 resnet50 roofline rows show an efficiency above 100 %, unflagged"),
    case("roofline-truth-r50-json", "roofline", R50, *B32_FP16, "--db", TRUTH, "--json"),
    case("roofline-h200-b1-fp32", "roofline", R50, "--db", H200),
    case("roofline-h200-nchw", "roofline", BNKEPT, *B32_FP16, "--db", H200, "--layout", "nchw"),
    case("roofline-h200-time-json", "roofline", f"{REF}/vgg16.onnx", *B32_FP16, "--db", H200, "--kind", "time",
         "--json"),
    case("roofline-part-measured", "roofline", f"{REF}/resnet18.onnx", *B32_FP16, "--db", PART, "--system", "1",
         "--ceilings", "measured"),
    case("roofline-part-nosystem", "roofline", R50, *B32_FP16, "--db", PART, defect=PDEF),
    case("roofline-svg-classic", "roofline", f"{REF}/alexnet.onnx", *B32_FP16, "--db", TRUTH, "--svg",
         "{tmp}/r.svg", files=(("r.svg", "text"),), normalize=(SVG_IDS,), note="matplotlib's random SVG ids numbered"),
    case("roofline-svg-time", "roofline", f"{REF}/alexnet.onnx", *B32_FP16, "--db", TRUTH, "--kind", "time",
         "--svg", "{tmp}/t.svg", files=(("t.svg", "text"),), normalize=(SVG_IDS,), note="matplotlib's random SVG ids numbered"),
    case("roofline-png", "roofline", f"{REF}/alexnet.onnx", *B32_FP16, "--db", TRUTH, "--png", "{tmp}/r.png",
         files=(("r.png", "png"),), note="PNG bytes are not recorded: existence, signature, size class and mode"),
    case("roofline-vit-b1", "roofline", f"{REF}/vit_b_16.onnx", "-t", "fp16", "--db", TRUTH))

# ------------------------------------------------------------------------------------------ predict

add(case("predict-pair-bnkept-H200-to-H100", "predict", BNKEPT, *B32_FP16, "--db", PAIR, "--from", "H200", "--to",
         "h100-sxm", defect="predict H200->H100 says 2.71 ms while analyze --system H100 prints 3.40 ms"),
    case("predict-pair-bnkept-H100-to-H200-json", "predict", BNKEPT, *B32_FP16, "--db", PAIR, "--from", "H100",
         "--to", "H200", "--json"),
    case("predict-pair-googlenet-dram", "predict", f"{ZOO}/googlenet.onnx", *B32_FP16, "--db", PAIR, "--from",
         "NVIDIA H200", "--to", "A100", "--memory", "dram"),
    case("predict-truth-r50-to-a100", "predict", R50, *B32_FP16, "--db", TRUTH, "--to", "A100"),
    case("predict-truth-r50-to-l4-json", "predict", R50, "-b", "1", "-t", "fp16", "--db", TRUTH, "--to", "L4",
         "--json"),
    case("predict-truth-r50-to-h200", "predict", R50, *B32_FP16, "--db", TRUTH, "--to", "H200"),
    case("predict-truth-nchw-b200", "predict", f"{REF}/resnet18.onnx", *B32_FP16, "--db", TRUTH, "--to", "B200",
         "--layout", "nchw"),
    case("predict-truth-train", "predict", f"{REF}/resnet18_train.onnx", *B32_FP16, "--db", TRUTH, "--to",
         "h100-sxm", "--train"),
    case("predict-truth-train-adam-json", "predict", f"{REF}/alexnet_train.onnx", *B32_FP16, "--db", TRUTH, "--to",
         "h100-sxm", "--train", "--optimizer", "adamw", "--json"),
    case("predict-part-32sms-to-h100", "predict", R50, *B32_FP16, "--db", PART, "--from",
         "NVIDIA H100 80GB HBM3 [32 SMs]", "--to", "h100-sxm"),
    case("predict-part-nofrom", "predict", R50, *B32_FP16, "--db", PART, "--to", "h100-sxm", defect=PDEF),
    case("predict-decoder", "predict", f"{DEC}/gpt2_prefill_dynamo20.onnx", "-t", "fp16", "--db", TRUTH, "--to",
         "h100-sxm", defect="predict on a decoder suggests a --dim flag it does not have"),
    case("predict-decoder-decode", "predict", f"{DEC}/llama_decode_dynamo23.onnx", "-t", "fp16", "--db", TRUTH,
         "--to", "H200", defect="predict on a decoder suggests a --dim flag it does not have"),
    case("predict-no-dim-flag", "predict", f"{DEC}/gpt2_prefill_dynamo20.onnx", "--dim", "seq=128", "--db", TRUTH,
         "--to", "H200", defect="roofline and predict lack --dim, --batch-dim, --conv-tf32 and --cache"),
    case("roofline-no-conv-tf32-flag", "roofline", R50, "--conv-tf32", "--db", TRUTH,
         defect="roofline and predict lack --dim, --batch-dim, --conv-tf32 and --cache"))

# --------------------------------------------------------------------------------------------- db

add(*(case(f"db-systems-{n}", "db", "systems", "--db", d) for n, d in
      (("h200", H200), ("pair", PAIR), ("partitions", PART), ("truth", TRUTH))))
add(case("db-query-h200-r50-best-csv", "db", "query", "--db", H200, "--model", R50, "--batch", "32", "--best",
         "--dtype", "fp16", "--format", "csv"),
    case("db-query-h200-conv-table", "db", "query", "--db", H200, "--kind", "Conv", "--dtype", "fp16", "--limit",
         "25"),
    case("db-query-truth-gemm-json", "db", "query", "--db", TRUTH, "--kind", "Gemm", "--dtype",
         "fp16", "--best", "--format", "json", "--limit", "20"),
    case("db-query-truth-param", "db", "query", "--db", TRUTH, "--kind", "Conv", "--param", "group=1",
         "--dtype", "fp16", "--math", "tensor_op", "--sort", "algorithm", "--limit", "15", "--format", "csv"),
    case("db-query-h200-status", "db", "query", "--db", H200, "--status", "not_supported", "--limit", "10",
         "--format", "csv"),
    case("db-query-pair-model-name", "db", "query", "--db", PAIR, "--model", "lstm_lm", "--format", "json"),
    case("db-query-h200-cold", "db", "query", "--db", H200, "--model", "vgg16", "--cache", "cold", "--best",
         "--dtype", "fp32"),
    case("db-query-bad-param", "db", "query", "--db", H200, "--param", "kernel"),
    case("db-query-no-rows", "db", "query", "--db", H200, "--kind", "SDPA"))
add(case("db-shared-h200-r50", "db", "shared", R50, "--db", H200, "--batch", "32", "--dtype", "fp16"),
    case("db-shared-h200-vgg16-json", "db", "shared", "vgg16", "--db", H200, "--json"),
    case("db-shared-truth-bert", "db", "shared", f"{REF}/bert_base.onnx", "--db", TRUTH, "--batch", "32", "--dtype",
         "fp16", "--system", "NVIDIA H200"),
    case("db-shared-pair-unmeasured-dtype", "db", "shared", BNKEPT, "--db", PAIR, "--dtype", "bf16"))
add(case("db-compare-pair-csv", "db", "compare", "H100", "H200", "--dtype", "fp16", "--db", PAIR, "--format", "csv",
         note="the example of `db compare --help`, as CSV (its table is 0.5 MB)"),
    case("db-compare-pair-lstm", "db", "export", "--db", PAIR, "--model", "lstm_lm", "-o", "{tmp}/lstm.sqlite",
         then=(("db", "compare", "H100", "H200", "--dtype", "fp16", "--db", "{tmp}/lstm.sqlite"),
               ("db", "compare", "1", "2", "--dtype", "fp16", "--db", "{tmp}/lstm.sqlite", "--format", "json")),
         note="db compare (table and JSON) on one model's export, to keep the recording small"),
    case("db-compare-part-cold", "db", "compare", "1", "2", "--dtype", "fp32", "--db", PART, "--cache", "cold"))

# export: a portable SQLite file (recorded through db systems / db shared on it), gbench and nvbench JSON
add(case("db-export-model-resnet50", "db", "export", "--db", H200, "--model", "resnet50", "-o", "{tmp}/r50.sqlite",
         then=(("db", "systems", "--db", "{tmp}/r50.sqlite"),
               ("db", "shared", "vgg16", "--db", "{tmp}/r50.sqlite"),
               ("db", "shared", "resnet50", "--db", "{tmp}/r50.sqlite", "--batch", "32", "--dtype", "fp16"),
               ("db", "import", "{tmp}/r50.sqlite", "--db", "{tmp}/merged.sqlite"),
               ("db", "shared", "vgg16", "--db", "{tmp}/merged.sqlite", "--json"),
               ("db", "shared", "vgg16", "--db", "{tmp}/merged.sqlite", "--batch", "32", "--dtype", "fp16"),
               ("db", "shared", f"{REF}/vgg16.onnx", "--db", "{tmp}/merged.sqlite", "--batch", "32", "--dtype",
                "fp16")),
         normalize=(RATE,), note="the import's rows/s normalized",
         defect="db export --model resnet50 writes partial records of other models; after import, db shared vgg16 "
                "says \"3 of 3 measured, 0 to measure\" (truth: 3 of 35)"),
    case("db-export-system-pair", "db", "export", "--db", PAIR, "--system", "H100", "-o", "{tmp}/h100.sqlite",
         then=(("db", "systems", "--db", "{tmp}/h100.sqlite"),
               ("analyze", BNKEPT, *B32_FP16, "--db", "{tmp}/h100.sqlite", "--no-layers"))),
    case("db-export-exists", "db", "export", "--db", PAIR, "--model", "lstm_lm", "-o", "{tmp}/l.sqlite",
         then=(("db", "export", "--db", PAIR, "--model", "lstm_lm", "-o", "{tmp}/l.sqlite"),)),
    case("db-export-gbench-pair-h100", "db", "export", "--db", PAIR, "--system", "H100", "--model", "lstm_lm",
         "--format", "gbench", "-o",
         "{tmp}/h100.json", files=(("h100.json", "text"),), normalize=(DATE,)),
    case("db-export-nvbench-pair-h200", "db", "export", "--db", PAIR, "--system", "NVIDIA H200", "--model",
         "lstm_lm", "--format", "nvbench", "-o", "{tmp}/h200.json", files=(("h200.json", "text"),),
         normalize=(DATE,), defect="NVBench exports of the shipped (warm-only) databases give nvbench_compare.py "
                                   "0 matches, with no warning"),
    case("db-export-gbench-two-systems", "db", "export", "--db", PAIR, "--format", "gbench", "-o", "{tmp}/x.json",
         files=(("x.json", "text"),)))

# ------------------------------------------------------------------------------------------- torch
# without PyTorch's model libraries (the CI's environment): the "internal error" exit 70

add(case("torch-without-torchvision", "torch", "resnet50", "--batch", "1", absent=("torchvision",),
         defect="benanza torch without torchvision/transformers: \"internal error ... ModuleNotFoundError\", exit 70"),
    case("torch-without-transformers", "torch", "transformers:bert", "--batch", "1", absent=("transformers",),
         defect="benanza torch without torchvision/transformers: \"internal error ... ModuleNotFoundError\", exit 70"))

# ----------------------------------------------------------------------------------------- profile

add(case("profile-from-native-resnet50", "profile", f"{NATIVE}/resnet50-b32-fp16/model.onnx", "--from",
         f"{NATIVE}/resnet50-b32-fp16"),
    case("profile-from-bnkept", "profile", BNKEPT, "--from", f"{PROFILES}/resnet50_bnkept-b32-fp16"),
    case("profile-from-file-not-folder", "profile", f"{TRACES}/resnet18_train.onnx", "--from",
         f"{TRACES}/resnet18_train_b2_fp32.profile.json"),
    case("profile-from-missing", "profile", R50, "--from", "{tmp}/nope"))

# ---------------------------------------------------------------------------------------- generate

add(case("generate-resnet50-fp16", "generate", R50, "-b", "1,32", "-t", "fp16", "-o", "{tmp}/suite",
         files=(("suite", "manifest"),)),
    case("generate-bnkept-train", "generate", f"{REF}/resnet18_train.onnx", "-b", "2", "-t", "fp32", "--train",
         "--optimizer", "adam", "-o", "{tmp}/suite", files=(("suite", "suite"),)),
    case("generate-kinds-nchw", "generate", f"{ZOO}/googlenet.onnx", "--kinds", "Activation,Pooling", "--layout",
         "nchw", "-o", "{tmp}/suite", files=(("suite", "suite"),)),
    case("generate-conv-tf32", "generate", f"{ZOO}/lstm_lm.onnx", "-t", "fp32", "--conv-tf32", "-o", "{tmp}/suite",
         files=(("suite", "suite"),)),
    case("generate-gpt2-decode", "generate", f"{DEC}/gpt2_decode_dynamo20.onnx", "--dim", "past=128", "-t", "fp16",
         "-o", "{tmp}/suite", files=(("suite", "suite"),)))

# ------------------------------------------------------------------------------------ the terminal
# stdout on a pseudo-terminal: tables fitted to COLUMNS (columns dropped, names cut), colour on

add(case("tty-layers-80", "layers", R50, tty=True),
    case("tty-analyze-100", "analyze", R50, *B32_FP16, "--db", TRUTH, tty=True, env={"COLUMNS": "100"}),
    case("tty-analyze-200", "analyze", f"{REF}/resnet18.onnx", *B32_FP16, "--db", TRUTH, tty=True,
         env={"COLUMNS": "200"}),
    case("tty-roofline-120", "roofline", f"{REF}/resnet18.onnx", *B32_FP16, "--db", TRUTH, tty=True,
         env={"COLUMNS": "120"}),
    case("tty-db-query-80", "db", "query", "--db", H200, "--kind", "Conv", "--limit", "10", tty=True),
    case("tty-insights-120", "analyze", BNKEPT, *B32_FP16, "--db", TRUTH, "--profile",
         f"{PROFILES}/resnet50_bnkept-b32-fp16", "--no-layers", tty=True, env={"COLUMNS": "120"}),
    case("tty-predict-90", "predict", BNKEPT, *B32_FP16, "--db", PAIR, "--from", "H200", "--to", "h100-sxm", tty=True,
         env={"COLUMNS": "90"}))

_names = [c.name for c in CASES]
assert len(_names) == len(set(_names)), "duplicate case names"
BY_NAME = {c.name: c for c in CASES}
