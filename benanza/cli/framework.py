"""``profile`` and ``torch``: the framework side (PyTorch), each handed to a use case and its result to
:mod:`benanza.reports.framework`. ``--dtype`` here is a framework data type
(:data:`benanza.spec.FRAMEWORK_DTYPES`): its meaning of ``fp32`` is said in each command's help."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer

from benanza.cli.app import guarded, progress, steps
from benanza.lazy import LazyModule
from benanza.cli.options import (TIMING_OPTIONS, BatchDim, Batches, Db, Dim, Iterations, Model, Optimizer, Runs,
                                 Warmup)
from benanza.errors import UsageError
from benanza.spec import (DTYPE_HELP, MAX_TOKENS, Phase, Timing, TorchRequest, optimizer as spec_optimizer, parse_dims,
                          parse_input_shape)

report = LazyModule("benanza.reports.framework")


def _opt(t, *names: str, help: str):
    return Annotated[t, typer.Option(*names, help=help)]


ProfBatch = _opt(Optional[int], "--batch", "-b", help="batch size (default 1; with --from: the profile's)")
ProfDtype = _opt(str, "--dtype", "-t", help=DTYPE_HELP["profile"])
ProfOut = _opt(Optional[Path], "-o", "--output", help="profile folder to write (default ./profile-MODEL-bN-DTYPE)")
ProfFrom = _opt(Optional[Path], "--from", help="read this profile folder instead of running the model (e.g. from your "
                "own PyTorch program)")
ProfDevice = _opt(str, "--device", help="cuda, cuda:N or cpu")
CudnnBenchmark = _opt(bool, "--cudnn-benchmark/--no-cudnn-benchmark", help="torch.backends.cudnn.benchmark (engine "
                      "autotuning)")
ChannelsLast = _opt(bool, "--channels-last", help="run the model and its 4-D inputs in torch.channels_last (NHWC) "
                    "memory format")
ProfLogs = _opt(bool, "--logs/--no-logs", help="also run with cuDNN and cuBLASLt logging (engines, algorithms)")
ProfForce = _opt(bool, "--force", help="replace a profile already in the output folder")
Timeout = _opt(float, "--timeout", help="seconds per PyTorch run")
ProfJson = _opt(bool, "--json", help="JSON on stdout (the joined profile)")


@guarded
def profile(model: Model, batch: ProfBatch = None, dtype: ProfDtype = "fp32", output: ProfOut = None,
            load: ProfFrom = None, device: ProfDevice = "cuda", warmup: Warmup = 20, runs: Runs = 100,
            iterations: Iterations = 5, cudnn_benchmark: CudnnBenchmark = True, channels_last: ChannelsLast = False,
            logs: ProfLogs = True, force: ProfForce = False, timeout: Timeout = 1800.0, json_out: ProfJson = False,
            dim: Dim = None, batch_dim: BatchDim = None):
    """Run MODEL in PyTorch under torch.profiler (and cuDNN/cuBLASLt logging) into a profile folder,
    join its kernels with the model's layers and print what the framework did.

    Example: benanza profile resnet50.onnx --batch 32 --dtype fp16 -o prof-r50"""
    from benanza.usecases.profile import profile as profile_case

    if load is not None and output is not None:
        raise UsageError("--from reads a profile and -o writes one: give one of them")
    with steps(quiet=json_out) as say:  # each step's line, and a spinner on a terminal
        p = profile_case(model, batch, dtype, output, load, parse_dims(dim), batch_dim, dict(
            device=device, warmup=warmup, runs=runs, iterations=iterations, cudnn_benchmark=cudnn_benchmark,
            logs=logs, force=force, timeout=timeout, channels_last=channels_last), progress(json_out, say))
    report.print_profile(p, json_out)


TORCH_SPEC_HELP = ("a torchvision model name (resnet50, vit_b_16), transformers:TYPE (transformers:bert) or "
                   "package.module:factory (a function returning the nn.Module)")
TORCH_TRAIN_HELP = ("profile training steps (forward, loss, backward, optimizer step) and report the step's "
                    "Benanza ratio against `bench --train`'s training-step LBL")


def bench_timing(bench_args: str) -> Timing:
    """``--bench-args '--max-engines 4 --no-cold'``: the timing options of ``benanza bench`` it names,
    parsed with those options' own declarations (:data:`benanza.cli.options.TIMING_OPTIONS`) into a
    :class:`benanza.spec.Timing`: the bench runs in this process, no child command line is built.
    Raises UsageError for any other word."""
    import click

    params = [click.Option([n, *o.param_decls], is_flag=t is bool, default=o.default,
                           type=None if t is bool else t if t in (int, float) else str)
              for n, (t, o) in TIMING_OPTIONS.items()]
    try:
        ctx = click.Command("bench", params=params).make_context("bench", shlex.split(bench_args))
    except click.UsageError as e:
        raise UsageError(f"--bench-args {bench_args!r}: {e.format_message()} (bench's timing options only)") from None
    return Timing(**ctx.params)


Dtype = _opt(str, "--dtype", "-t", help=DTYPE_HELP["torch"])
Output = _opt(Optional[Path], "-o", "--output", help="working folder: the export, profiles and reports (default "
              "./benanza-torch-NAME)")
PhaseOpt = _opt(str, "--phase", help="a transformers decoder's phase: prefill (the prompt's forward pass, --seq tokens: "
                "time to first token) or decode (one new token per sequence against a KV cache of --kv-len tokens: "
                "time per output token)")
Mla = _opt(str, "--mla", help="with --phase decode of an MLA decoder (DeepSeek-V2/V3): transformers (default: its own "
           "step, the latent cache re-expanded into per-head keys and values each step) or absorbed (the weight-absorbed "
           "step serving engines run: one attention of the heads over the latent cache); the LBL is of the form exported")
Logs = _opt(bool, "--logs/--no-logs", help="also profile each eager run with cuDNN and cuBLASLt logging, a run of its "
            "own (the engines and algorithms the framework chose; --no-logs: a third less profiling, the reports "
            "without them)")


TorchDevice = _opt(str, "--device", help="cuda or cuda:N")
TorchChannelsLast = _opt(bool, "--channels-last", help="also profile the module in torch.channels_last memory format")
Compile = _opt(Optional[str], "--compile", help="also profile torch.compile(module, mode=MODE): default, "
               "reduce-overhead or max-autotune")
Bench = _opt(bool, "--bench/--no-bench", help="bench the layers first (--no-bench: the database has them)")
BenchArgs = _opt(str, "--bench-args", help="more `benanza bench` timing options, one string, e.g. '--max-engines 4 "
                 "--no-cold'")
Seq = _opt(int, "--seq", help=f"sequence length of transformers inputs (prefill; 1 to {MAX_TOKENS}, and at "
           "most the model's max_position_embeddings)")
KvLen = _opt(Optional[int], "--kv-len", help="with --phase decode: tokens in the KV cache (default --seq; "
               f"1 to {MAX_TOKENS})")
InputShape = _opt(Optional[str], "--input-shape", help="per-sample input shape of an image model, e.g. 3x299x299")
TorchForce = _opt(bool, "--force", help="export again over an existing export")
TorchJson = _opt(bool, "--json", help="the insights documents as JSON on stdout")
TorchTrain = _opt(bool, "--train", help=TORCH_TRAIN_HELP)
Spec = Annotated[str, typer.Argument(help=TORCH_SPEC_HELP)]


@guarded
def torch_cmd(spec: Spec, batch: Batches = "1", dtype: Dtype = "fp32", db: Db = None, output: Output = None,
              device: TorchDevice = "cuda", channels_last: TorchChannelsLast = False, compile_mode: Compile = None,
              bench: Bench = True, bench_args: BenchArgs = "", seq: Seq = 128, phase: PhaseOpt = "prefill",
              kv_len: KvLen = None, input_shape: InputShape = None, warmup: Warmup = 20, runs: Runs = 100,
              iterations: Iterations = 5, logs: Logs = True, force: TorchForce = False, json_out: TorchJson = False,
              train: TorchTrain = False, optimizer: Optimizer = None, mla: Mla = "transformers"):
    """Analyze a PyTorch module as users run it: export it to ONNX, bench its layers, profile the
    module itself (eager; channels_last and torch.compile when asked), join its kernels to the
    layers and report how fast it could run and what stands in the way (--train: of a training step).

    Example: benanza torch resnet50 --batch 1,32 --dtype fp16"""
    from benanza.processing.model import parse_batches
    from benanza.usecases.torch import torch as torch_case

    req = TorchRequest(spec, tuple(parse_batches(batch)), dtype, db, output, device, channels_last, compile_mode,
                       bench, bench_timing(bench_args), seq, Phase("training" if train else "inference", phase), kv_len,
                       parse_input_shape(input_shape), warmup, runs, iterations, logs, force,
                       spec_optimizer(optimizer, train), mla)
    with steps(quiet=json_out) as say:  # each step's line, and a spinner on a terminal
        r = torch_case(req, progress(json_out, say), report.write_html)
    report.print_torch(r, json_out)

