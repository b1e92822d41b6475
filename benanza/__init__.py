"""benanza: lower-bound latency of ONNX models on GPUs from per-layer cuDNN/cuBLAS benchmarks.

PyTorch modules: ``benanza torch SPEC`` and :func:`analyze_module` (:mod:`benanza.api`, in this process).

Vocabulary: :mod:`benanza.spec` (each concept defined and validated once); use cases: :mod:`benanza.usecases`
(one per command, called by the CLI, :mod:`benanza.cli`, and the API, :mod:`benanza.api`, alike).

Pipeline (one module each): :mod:`benanza.processing.model` (model processor), :mod:`benanza.generation.generator`
(benchmark generator), :mod:`benanza.build.builder` (CMake build), :mod:`benanza.runner.run` (GPU runs),
:mod:`benanza.database.store` (performance database), :mod:`benanza.analysis.analyzer` (LBL and advice).
Method: Li, Dakkak, Xiong, Hwu, "Benanza: Automatic uBenchmark Generation to Compute 'Lower-bound'
Latency and Inform Optimizations of Deep Learning Models on GPUs", IPDPS 2020.
"""

__version__ = "0.1.0"


def analyze_module(module, example_inputs, **kw):
    """benanza for a PyTorch module object: export, bench, profile the module itself and analyze.
    See :func:`benanza.api.analyze_module` (arguments, errors); returns one insights document (a
    dict, as ``benanza torch --json`` gives it) per profiled run."""
    from benanza.api import analyze_module as _analyze_module

    return _analyze_module(module, example_inputs, **kw)
