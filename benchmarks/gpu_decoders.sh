#!/usr/bin/env bash
# Decoder LLMs on a lent GPU machine (issue 27), one call: install benanza from the working tree
# (benchmarks/gpu_install.sh; .whl and .fe carried), bench the small decoder exports of
# tests/data/decoders (each attention form) at SEQ tokens, then `benanza torch` of a transformers
# Llama-style configuration in its prefill and decode phases. Results go into OUT as they come.
#   bash benchmarks/gpu_decoders.sh OUT
# Environment: SEQ (512), KV (512), BATCH (1,8), DTYPE (fp16: the FILES benches' --dtype; fp8 times each
# attention in FP8 too, cudnn-frontend's sdpa_fp8), SPEC (a transformers spec with overrides),
# BENCH_ARGS ("--no-cold --max-engines 4"), LLM_ARGS (truth.py --llm's options: run it last), FILES (the exports under tests/data/decoders to bench; a
# *_decode_* file binds past=KV, and a TorchScript one total=KV+1), PHASES ("prefill decode"; empty: no `benanza torch`).
# WORK: the machine's work folder (default /tmp/dec; one per script when benchmarks/gpu_pair.sh runs two at once,
# e.g. an LLM command per GPU, each of another configuration: two benches of one export would share its suite
# folder under ~/.cache/benanza/suites). LLM_ARGS="... --streams 2" runs two LLM commands at once on this GPU, taking
# turns on it through one shared lock (benchmarks/llm_truth.py run_streams). Each step writes one file (stdout and stderr together): the lent machines send back
# 8 files at most.
# Exports of earlier calls: an LLM's ONNX export takes 15-130 s of a case's 200-500 s on a fresh machine
# (2026-11-28, run.command_seconds). The export cache (benanza.processing.cache; BENANZA_EXPORT_CACHE, default
# WORK/exports) is seeded from every archive of EXPORTS_IN (default: the checked-in seeds benchmarks/exports/*.tgz and *.tar.xz
# and .exports/*.tgz, carried beside .whl and .fe) and packed into OUT/exports.tgz at the end, to be carried to the
# next call (or checked in under benchmarks/exports: its README). An entry is used only
# under its own key: the same model, phase and length, the same torch, transformers, onnx and onnxscript
# versions and benanza's export code; any other export is made again.
set -uo pipefail
OUT=${1:?usage: gpu_decoders.sh OUT}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_decoders.log") 2>&1
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_decoders: install failed"; exit 1; }
python3 -c "import onnxscript" 2>/dev/null || {
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/opt/*.whl && echo "onnxscript carried"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cudnn", torch.backends.cudnn.version())'
echo "gpu_decoders: installed in $(( $(date +%s) - t0 )) s"
SEQ=${SEQ:-512}; KV=${KV:-512}; BATCH=${BATCH:-1,8}
BENCH_ARGS=${BENCH_ARGS:---no-cold --max-engines 4}
W=${WORK:-/tmp/dec}
DB=$W/perf.db
mkdir -p "$W"
# benanza's caches (a bench's suite folder under XDG_CACHE_HOME/benanza/suites, named after its export) in this
# command's own folder: two commands of one export on two GPUs of one machine would share one suite folder
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$W/xdg}
export BENANZA_EXPORT_CACHE=${BENANZA_EXPORT_CACHE:-$W/exports}
mkdir -p "$BENANZA_EXPORT_CACHE"
for a in ${EXPORTS_IN:-benchmarks/exports/*.tgz benchmarks/exports/*.tar.xz .exports/*.tgz}; do
  # Python's tarfile reads gzip and xz alike (the machine may have no xz program)
  [ -f "$a" ] && python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
      "$a" "$BENANZA_EXPORT_CACHE" && echo "gpu_decoders: exports of $a in the export cache"
done
rm -f "$OUT/logs.tar"
for f in ${FILES:-llama_prefill_dynamo23 llama_prefill_dynamo20 gpt2_prefill_dynamo20 llama_prefill_torchscript}; do
  t1=$(date +%s)
  # a decode export's past key/values are [batch, heads, past, head_dim] and its mask [batch, total]; the
  # dynamo exports name the total length "past + 1" (bound with past; --dim names only a model's own dims)
  dims=(--dim seq="$SEQ")
  case $f in *_decode_torchscript) dims=(--dim past="$KV" --dim total=$((KV + 1)));; *_decode_*) dims=(--dim past="$KV");; esac
  # shellcheck disable=SC2086
  timeout 240 python3 -m benanza bench "tests/data/decoders/$f.onnx" --batch "$BATCH" "${dims[@]}" --dtype "${DTYPE:-fp16}" \
      --db "$DB" -o "$W/suite-$f" $BENCH_ARGS > "$W/bench-$f.txt" 2>&1
  echo "gpu_decoders: bench $f exit $? in $(( $(date +%s) - t1 )) s"
  grep -E "LBL|complete|unsupported|INCOMPLETE|FP8|fp8" "$W/bench-$f.txt" | tail -10
  tar -C "$W" -rf "$OUT/logs.tar" "bench-$f.txt"
done
SPEC=${SPEC:-transformers:llama?num_hidden_layers=4&hidden_size=1024&intermediate_size=2816&num_attention_heads=16&num_key_value_heads=4&vocab_size=32000}
for ph in ${PHASES-prefill decode}; do
  t1=$(date +%s)
  extra=(--seq "$SEQ"); [ "$ph" = decode ] && extra=(--phase decode --kv-len "$KV")
  timeout 300 python3 -m benanza torch "$SPEC" "${extra[@]}" --batch "$BATCH" --dtype fp16 --db "$DB" \
      -o "$W/torch-$ph" --bench-args "$BENCH_ARGS" > "$W/torch-$ph.txt" 2>&1
  echo "gpu_decoders: torch $ph exit $? in $(( $(date +%s) - t1 )) s"
  grep -E -i "ratio|LBL|INCOMPLETE|unsupported" "$W/torch-$ph.txt" | head -12; tail -4 "$W/torch-$ph.txt"
  tar -C "$W" -rf "$OUT/logs.tar" "torch-$ph.txt"
done
# the LLM truth (benchmarks/llm_truth.py) with LLM_ARGS, e.g. "--configs llama --cases decode128 --dtype fp16
# --deadline 200"; keep --deadline + --timeout + the install under the call's limit: a command
# started before the deadline runs to its --timeout): its tables come back, each command's folder (report, stderr) in llm-runs.tar.gz
if [ -n "${LLM_ARGS:-}" ]; then
  t1=$(date +%s)
  # rows come back as they finish: a call cut at the machine's limit still returns those done
  ( while sleep 10; do cp "$W/llm/results.jsonl" "$OUT/llm-results.jsonl.tmp" 2>/dev/null &&
      mv "$OUT/llm-results.jsonl.tmp" "$OUT/llm-results.jsonl"; done ) & copier=$!
  # shellcheck disable=SC2086
  python3 benchmarks/truth.py --llm --out "$W/llm" --db "$DB" $LLM_ARGS $BENCH_ARGS > "$W/llm.txt" 2>&1
  echo "gpu_decoders: llm truth exit $? in $(( $(date +%s) - t1 )) s"; tail -30 "$W/llm.txt"
  kill $copier 2>/dev/null
  cp "$W/llm/results.jsonl" "$OUT/llm-results.jsonl" 2>/dev/null
  # the reports' JSON, profiles' summaries and stderr; without the HTML reports and the traces (1-2 MB each:
  # four commands' runs passed the 16 MiB a returned file may have, 2026-11-28c call 3) unless RUNS_FULL=1
  ex=(--exclude='*.html' --exclude='trace.json.gz' --exclude='*.onnx'); [ "${RUNS_FULL:-0}" = 1 ] && ex=()
  tar -C "$W" "${ex[@]}" -czf "$OUT/llm-runs.tar.gz" llm.txt llm/runs 2>/dev/null
fi
gzip -c "$DB" > "$OUT/decoders-db.sqlite.gz"
ls "$BENANZA_EXPORT_CACHE"/*.onnx >/dev/null 2>&1 && tar -C "$BENANZA_EXPORT_CACHE" -czf "$OUT/exports.tgz" .
echo "gpu_decoders: done in $(( $(date +%s) - t0 )) s"
