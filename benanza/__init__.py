"""benanza: lower-bound latency of ONNX models on GPUs from per-layer cuDNN/cuBLAS benchmarks.

Pipeline (one module each): :mod:`benanza.model` (model processor), :mod:`benanza.generator`
(benchmark generator), :mod:`benanza.builder` (CMake build), :mod:`benanza.runner` (GPU runs),
:mod:`benanza.database` (performance database), :mod:`benanza.analyzer` (LBL and advice).
Method: Li, Dakkak, Xiong, Hwu, "Benanza: Automatic uBenchmark Generation to Compute 'Lower-bound'
Latency and Inform Optimizations of Deep Learning Models on GPUs", IPDPS 2020.
"""

__version__ = "0.1.0"
