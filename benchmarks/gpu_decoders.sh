#!/usr/bin/env bash
# Decoder LLMs on a lent GPU machine (issue 27), one call: install benanza from the working tree
# (benchmarks/gpu_install.sh; .whl and .fe carried), bench the small decoder exports of
# tests/data/decoders (each attention form) at SEQ tokens, then `benanza torch` of a transformers
# Llama-style configuration in its prefill and decode phases. Results go into OUT as they come.
#   bash benchmarks/gpu_decoders.sh OUT
# Environment: SEQ (512), KV (512), BATCH (1,8), SPEC (a transformers spec with overrides),
# BENCH_ARGS ("--no-cold --max-engines 4"), FILES (the exports under tests/data/decoders to bench).
# Each step writes one file (stdout and stderr together): the lent machines send back 8 files at most.
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
DB=/tmp/dec/perf.db
mkdir -p /tmp/dec
for f in ${FILES:-llama_prefill_dynamo23 llama_prefill_dynamo20 gpt2_prefill_dynamo20 llama_prefill_torchscript}; do
  t1=$(date +%s)
  # shellcheck disable=SC2086
  timeout 240 python3 -m benanza bench "tests/data/decoders/$f.onnx" --batch "$BATCH" --dim seq="$SEQ" --dtype fp16 \
      --db "$DB" -o "/tmp/dec/suite-$f" $BENCH_ARGS > "$OUT/bench-$f.txt" 2>&1
  echo "gpu_decoders: bench $f exit $? in $(( $(date +%s) - t1 )) s"
  grep -E "LBL|complete|unsupported|INCOMPLETE" "$OUT/bench-$f.txt" | tail -8
done
SPEC=${SPEC:-transformers:llama?num_hidden_layers=4&hidden_size=1024&intermediate_size=2816&num_attention_heads=16&num_key_value_heads=4&vocab_size=32000}
for ph in prefill decode; do
  t1=$(date +%s)
  extra=(--seq "$SEQ"); [ "$ph" = decode ] && extra=(--phase decode --kv-len "$KV")
  timeout 300 python3 -m benanza torch "$SPEC" "${extra[@]}" --batch "$BATCH" --dtype fp16 --db "$DB" \
      -o "/tmp/dec/torch-$ph" --bench-args "$BENCH_ARGS" > "$OUT/torch-$ph.txt" 2>&1
  echo "gpu_decoders: torch $ph exit $? in $(( $(date +%s) - t1 )) s"
  grep -E -i "ratio|LBL|INCOMPLETE|unsupported" "$OUT/torch-$ph.txt" | head -12; tail -4 "$OUT/torch-$ph.txt"
done
gzip -c "$DB" > "$OUT/decoders-db.sqlite.gz"
echo "gpu_decoders: done in $(( $(date +%s) - t0 )) s"
