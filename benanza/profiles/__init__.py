"""Framework profiles: what PyTorch ran for a model, joined to the model's layers.

Modules: :mod:`~benanza.profiles.trace` (torch.profiler Chrome trace), :mod:`~benanza.profiles.cudnn_log`
(cuDNN API log), :mod:`~benanza.profiles.cublaslt_log` (cuBLASLt log), :mod:`~benanza.profiles.join`
(kernels to layers), :mod:`~benanza.profiles.profile` (the :class:`Profile` data model and the
folder reader), :mod:`~benanza.profiles.capture` (``benanza profile``: run the model in PyTorch).

The profile folder
------------------

``benanza profile MODEL --batch N --dtype D -o DIR`` writes, and ``benanza profile MODEL --from DIR``
(or :func:`load_profile`) reads, a folder::

    DIR/profile.json        required: what was run and the measured latency (below)
    DIR/trace.json.gz       required: torch.profiler Chrome trace (``.json`` or ``.json.gz``)
    DIR/cudnn.log.gz        optional: cuDNN API log, CUDNN_LOGLEVEL_DBG=3 (text or gzip)
    DIR/cublaslt.log.gz     optional: cuBLASLt log, CUBLASLT_LOG_LEVEL=5 (or 2) (text or gzip)

``profile.json`` (JSON object; only ``format``, ``batch`` and a trace file are required)::

    {
      "format": "benanza-profile", "version": 1,
      "model": "resnet50", "model_path": "/abs/or/relative/to/DIR/resnet50.onnx",
      "batch": 32, "dtype": "fp16",
      "files": {"trace": "trace.json.gz", "cudnn_log": "cudnn.log.gz", "cublaslt_log": "cublaslt.log.gz"},
      "latency": {"samples_ms": [1.93, 1.95, ...], "method": "cuda_events"},
      "profiled_iterations": 5,
      "settings": {"framework": "pytorch", "framework_version": "2.11.0", "cudnn_version": 91900,
                   "cuda_version": "13.0", "gpu_name": "NVIDIA H200", "device": "cuda:0",
                   "cudnn_benchmark": true, "allow_tf32_matmul": false, "allow_tf32_cudnn": false},
      "notices": []
    }

``latency`` holds the end-to-end time of one inference in milliseconds, measured *outside* the
profiler after warm-up: ``samples_ms`` (benanza derives the median and IQR) or ``median_ms`` (with
``q1_ms``/``q3_ms``). ``files`` names the files in DIR (the trace defaults to ``trace.json.gz`` or
``trace.json``; a log not named is not read). ``settings`` keys are free-form; those above are
the ones benanza reads. ``benanza profile``/``torch`` add ``seconds`` (wall seconds of the log run,
the timed run and, for a native module, its build inside the timed run: where a profile's time
goes; benanza reads nothing from it).

To profile your own PyTorch program the same way::

    # in the shell, before Python starts (the libraries read these when they load):
    #   CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=DIR/cudnn.log \\
    #   CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=DIR/cublaslt.log  python my_program.py
    # (logging slows every call: take the latency in a second run without these variables)
    from torch.profiler import profile, record_function, ProfilerActivity
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                         record_shapes=True) as prof:
        for _ in range(5):
            with record_function("benanza.iteration"):   # one inference per iteration
                model(x)
            torch.cuda.synchronize()
    prof.export_chrome_trace("DIR/trace.json")

and write ``profile.json`` with the batch, the latency samples and the settings. The trace must
come from an eager-mode model (``torch.compile`` fuses ops into Triton kernels that the join
reports as ``other``) run with ``record_shapes=True`` (the join matches ops to layers by input
shapes); iterations are ``record_function("benanza.iteration")`` ranges, or ``ProfilerStep#N``
of a profiler schedule, or else the whole trace.
"""
from benanza.profiles.capture import capture_profile
from benanza.profiles.cublaslt_log import CublasLtLog, Matmul, read_cublaslt_log
from benanza.profiles.cudnn_log import CudnnLog, Execution, read_cudnn_log
from benanza.profiles.join import CATEGORIES, JoinResult, KernelJoin, OpMatch, join
from benanza.profiles.profile import (ConvEngine, FrameworkSettings, GemmAlgo, LayerProfile, Latency, Profile, Unfused,
                      build_profile, load_profile)
from benanza.profiles.trace import HostBoundStretch, LaunchGap, Trace, busy_ms, host_bound_stretches, launch_gaps, read_trace

__all__ = [
    "CATEGORIES", "ConvEngine", "CublasLtLog", "CudnnLog", "Execution", "FrameworkSettings", "GemmAlgo",
    "HostBoundStretch", "JoinResult", "KernelJoin", "LaunchGap", "LayerProfile", "Latency", "Matmul", "OpMatch",
    "Profile", "Trace", "Unfused", "build_profile", "busy_ms", "capture_profile", "host_bound_stretches", "join",
    "launch_gaps", "load_profile", "read_cublaslt_log", "read_cudnn_log", "read_trace",
]
