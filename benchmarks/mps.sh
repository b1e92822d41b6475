# CUDA MPS partitions for the lent machine's scripts (issue 26), sourced: `. benchmarks/mps.sh`.
# A green context (BENANZA_SM_COUNT alone) confines the harness's kernels but the libraries still read
# the whole GPU's SM count from the device, so cuDNN's persistent kernels are sized for all of it and
# some fail their cooperative launch (2026-11-28d). An MPS client limited by
# CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is told its limit by the device itself, as a smaller GPU would be.
#   mps_start DIR    a control daemon of this shell's own for its one GPU (CUDA_VISIBLE_DEVICES, an
#                    index or a UUID): pipe and log folders under DIR, so no other process of the
#                    machine connects to it; both daemon and clients name the GPU by its UUID
#   mps_confine N    export the client environment of N SMs (BENANZA_PARTITION=mps, BENANZA_SM_COUNT=N,
#                    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE the smallest percentage, in steps of 0.25
#                    from N / SMs, whose client reports N SMs); returns 1 when none does
#   mps_release      unset the client environment (the whole GPU, outside MPS: no pipe folder set)
#   mps_stop         quit the daemon (also at the shell's exit)
# SMs a client reports: benanza's native module (cudaGetDeviceProperties), no PyTorch start-up; python3 -P:
# the installed package, not the tree of the current folder
MPS_SMS_PY='from benanza import _native; print(_native.query_devices()[0]["sm_count"])'
mps_start() {
  local dir=${1:?mps_start DIR} gpu=${CUDA_VISIBLE_DEVICES:-0}
  command -v nvidia-cuda-mps-control >/dev/null || { echo "mps: no nvidia-cuda-mps-control here"; return 1; }
  case "$gpu" in GPU-*|MIG-*) MPS_GPU=$gpu ;; *) MPS_GPU=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i "$gpu") ;; esac
  MPS_TOTAL=$(CUDA_VISIBLE_DEVICES=$MPS_GPU python3 -P -c "$MPS_SMS_PY") || { echo "mps: cannot query the GPU"; return 1; }
  mkdir -p "$dir/pipe" "$dir/log"
  export CUDA_VISIBLE_DEVICES=$MPS_GPU
  MPS_DIR=$dir
  CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log nvidia-cuda-mps-control -d \
    || { echo "mps: the control daemon did not start"; return 1; }
  trap mps_stop EXIT
  echo "mps: daemon for $MPS_GPU ($MPS_TOTAL SMs), pipe $dir/pipe"
  # the devices a client names are the server's: try the UUID, then the server's first device
  local got
  for MPS_CLIENT_GPU in "$MPS_GPU" 0; do
    got=$(CUDA_VISIBLE_DEVICES=$MPS_CLIENT_GPU CUDA_MPS_PIPE_DIRECTORY=$dir/pipe python3 -P -c "$MPS_SMS_PY" 2>&1 | tail -1)
    echo "mps: a client with CUDA_VISIBLE_DEVICES=$MPS_CLIENT_GPU sees $got SMs"
    case "$got" in ''|*[!0-9]*) ;; *) return 0 ;; esac
  done
  echo "mps: no client reaches the GPU"; tail -n 20 "$dir"/log/*.log 2>/dev/null; return 1
}
mps_confine() {
  local n=${1:?mps_confine N} p got tries
  p=$(python3 -c "print(round($n * 100 / $MPS_TOTAL * 4) / 4)")
  for tries in 1 2 3 4 5 6 7 8 9 10 11 12; do
    got=$(CUDA_VISIBLE_DEVICES=$MPS_CLIENT_GPU CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p \
          python3 -P -c "$MPS_SMS_PY" 2>&1 | tail -1)
    echo "mps: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p -> $got SMs"
    case "$got" in ''|*[!0-9]*) echo "mps: the client failed: $got"; tail -5 "$MPS_DIR"/log/*.log 2>/dev/null; return 1 ;; esac
    if [ "$got" = "$n" ]; then
      export BENANZA_PARTITION=mps BENANZA_SM_COUNT=$n CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p \
             CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe CUDA_VISIBLE_DEVICES=$MPS_CLIENT_GPU
      return 0
    fi
    if [ "$got" -lt "$n" ]; then p=$(python3 -c "print($p + 0.25)"); else p=$(python3 -c "print($p - 0.25)"); fi
  done
  echo "mps: no percentage gives $n SMs"; return 1
}
mps_release() {
  unset BENANZA_PARTITION BENANZA_SM_COUNT CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PIPE_DIRECTORY
  [ -n "${MPS_GPU:-}" ] && export CUDA_VISIBLE_DEVICES=$MPS_GPU
  return 0
}
mps_stop() {
  [ -n "${MPS_DIR:-}" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_DIR/pipe nvidia-cuda-mps-control >/dev/null 2>&1
  MPS_DIR=""
}
