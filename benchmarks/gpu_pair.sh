#!/usr/bin/env bash
# Several GPU scripts of this folder at once on a lent machine of several GPUs, one per GPU, in one
# call: benanza is installed once (benchmarks/gpu_install.sh; .whl and .fe carried; GPU_INSTALLED=1
# tells the scripts so), then each command runs with CUDA_VISIBLE_DEVICES set to its own GPU (round
# robin when there are more commands than GPUs) and SUB set to its own results folder, OUT/g0,
# OUT/g1, ...; its output goes to the call's output, each line prefixed [gN]. Each command needs a
# WORK folder of its own on the machine (gpu_predict.sh and gpu_truth.sh take WORK=...). With more
# commands than GPUs, the commands of one GPU share its lock (BENANZA_GPU_LOCK_SHARED): each measures
# only in its own turn.
#   bash benchmarks/gpu_pair.sh OUT 'WORK=/tmp/w0 bash benchmarks/gpu_predict.sh $SUB ...' \
#       'WORK=/tmp/w1 bash benchmarks/gpu_truth.sh $SUB --train ...'
# A lent machine sends back 8 files of OUT at most, two folders down: when the commands wrote more
# (RETURN_FILES, default 8), each command's folder is packed into OUT/gN.tgz after they all end, so
# their logs and databases come back too. Exit status: the first non-zero one of the commands.
#   bash benchmarks/gpu_pair.sh OUT --plan FILE
# takes the commands from FILE, one per line (blank lines and lines starting with # skipped): a call's
# command line is limited to 2,000 characters, and the plan, checked in beside its results, records what ran.
set -u
OUT=${1:?usage: gpu_pair.sh OUT COMMAND [COMMAND ...] | gpu_pair.sh OUT --plan FILE}; shift
if [ "${1:-}" = --plan ]; then
  plan=${2:?gpu_pair: --plan needs a file}
  [ -f "$plan" ] || { echo "gpu_pair: no plan file $plan"; exit 2; }
  mapfile -t cmds < <(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$plan")
  set -- "${cmds[@]}"
fi
[ $# -ge 1 ] || { echo "gpu_pair: no command"; exit 2; }
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
. benchmarks/gpu_install.sh || { echo "gpu_pair: install failed"; exit 1; }
export GPU_INSTALLED=1
n=$(nvidia-smi -L | wc -l)
[ "$n" -ge 1 ] || { echo "gpu_pair: no GPU"; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader
echo "gpu_pair: installed in $(( $(date +%s) - t0 )) s; $# commands on $n GPUs"
pids=()
i=0
for cmd in "$@"; do
  sub=$OUT/g$i
  mkdir -p "$sub"
  gpu=$(( i % n ))
  # more commands than GPUs: those of one GPU take turns on it through one shared lock (its benches'
  # workers, benanza torch's profiling children, truth.py's PyTorch side), per physical GPU
  lock=""; [ "$#" -gt "$n" ] && lock="/tmp/gpu-pair-$$-gpu$gpu"
  ( set -o pipefail; export CUDA_VISIBLE_DEVICES=$gpu SUB=$sub
    [ -n "$lock" ] && export BENANZA_GPU_LOCK_SHARED=$lock
    bash -c "$cmd" 2>&1 | sed -u "s/^/[g$i] /" ) &
  pids+=($!)
  i=$(( i + 1 ))
done
rc=0
for p in "${pids[@]}"; do wait "$p"; r=$?; [ "$rc" = 0 ] && rc=$r; done
files=$(find "$OUT" -type f | wc -l)
max=${RETURN_FILES:-8}
if [ "$files" -gt "$max" ]; then
  for d in "$OUT"/g*/; do
    d=${d%/}
    tar czf "$d.tgz" -C "$OUT" "$(basename "$d")" || continue
    # a returned file has at most 16 MiB: past 15, pack again without the bulky archives (runs, databases)
    if [ "$(stat -c %s "$d.tgz")" -gt $((15 * 1024 * 1024)) ]; then
      tar czf "$d.tgz" -C "$OUT" --exclude='*runs.tar.gz' --exclude='*.sqlite.gz' "$(basename "$d")" &&
        echo "gpu_pair: $(basename "$d").tgz over 15 MiB: packed without its runs archives and databases"
    fi
    rm -rf "$d"
  done
  echo "gpu_pair: $files files, more than the $max the machine sends back: each command's folder is packed into OUT/gN.tgz"
fi
echo "gpu_pair: done after $(( $(date +%s) - t0 )) s, exit $rc"
exit $rc
