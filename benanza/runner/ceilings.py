"""Machine ceilings measured by benanza itself on the GPU: the roofs of the roofline.

`benanza ceilings` builds a suite with no layer jobs (the harness alone) and runs it with
``--ceilings`` (cpp/src/ceilings.cpp): a 1 GiB device-to-device copy (DRAM bandwidth, bytes/s), the
same copy on a working set of half the L2 (L2 bandwidth, bytes/s),
cublasGemmEx of 8192^3 in fp32 (FMA), tf32, fp16 and bf16 (the library matrix rate, FLOP/s), and a
kernel of independent FP32 FMA chains (the CUDA-core rate, FLOP/s), each timed with the harness's
method. A ceiling's value is its work divided by the median time. They are stored per system in
the performance database (table ``ceilings``) for the roofline (:mod:`benanza.analysis.roofline`).
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from benanza.errors import DeviceError, UsageError
from benanza.database.records import MeasurementLine, RecordError

#: the ceilings the harness measures, and what each is the roof of
CEILINGS = {
    "dram_bandwidth": "DRAM bandwidth (device-to-device copy kernel, 16-byte vectors; read + write bytes)",
    "dram_bandwidth_memcpy": "device-to-device cudaMemcpyAsync (read + write bytes), for comparison",
    "l2_bandwidth": "L2 bandwidth (the copy kernel on an L2-resident working set of half the L2; read + write bytes)",
    "gemm_fp32": "FP32 GEMM rate, FMA math (cublasGemmEx, CUBLAS_COMPUTE_32F)",
    "gemm_tf32": "TF32 Tensor Core GEMM rate (CUBLAS_COMPUTE_32F_FAST_TF32)",
    "gemm_fp16": "FP16 Tensor Core GEMM rate (fp32 accumulation)",
    "gemm_bf16": "BF16 Tensor Core GEMM rate (fp32 accumulation)",
    "fma_fp32": "CUDA-core FP32 FMA rate (benanza kernel)",
}


@dataclass(frozen=True)
class CeilingResult:
    """One measured ceiling: ``value`` in ``unit`` = ``work`` / (``median_ms`` / 1000)."""

    name: str
    unit: str
    value: float
    work: float
    median_ms: float
    rse: float | None
    samples: int | None
    converged: bool | None
    method: str

    def to_row(self) -> dict:
        return dict(self.__dict__)


def parse_records(lines) -> tuple[dict | None, list[CeilingResult], list[str]]:
    """Parse a ``suite --ceilings`` output: (system record, the valid ceilings, the failures as
    "name: message"). Lines that are not JSON are ignored; a ceiling measurement is read as a typed
    record (:class:`benanza.database.records.MeasurementLine`; a malformed one is a failure that says
    why); a ceiling without a valid time is a failure, never a value."""
    system, out, failed = None, [], []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(rec, dict):
            continue
        if rec.get("type") == "system":
            system = rec.get("system")
        if rec.get("type") != "measurement" or rec.get("kind") != "Ceiling":
            continue
        try:
            m = MeasurementLine.from_json(rec)
        except RecordError as e:
            failed.append(f"{rec.get('algorithm', '?')}: {e}")
            continue
        if m.cache != "warm":
            continue
        name = m.details.get("ceiling") or m.algorithm
        if not m.valid or not m.median_ms > 0:
            failed.append(f"{name}: {m.message or m.status}")
            continue
        work = float(m.details["work"])
        out.append(CeilingResult(name=name, unit=m.details.get("unit", ""), value=work / (m.median_ms / 1e3),
                                 work=work, median_ms=m.median_ms, rse=m.rse, samples=m.samples,
                                 converged=m.converged, method=f"{m.call} {m.note}".strip()))
    return system, out, failed


def generate_suite(out_dir: str | Path) -> Path:
    """Write a suite with no layer jobs (the harness and its entry point) into ``out_dir``."""
    from benanza import __version__
    from benanza.generation.generator import jinja_env, harness_sources, write_if_changed, copy_harness, cpp_string

    root = Path(out_dir)
    (root / "src").mkdir(parents=True, exist_ok=True)
    env = jinja_env()
    write_if_changed(root / "src" / "suite_info.cpp", env.get_template("suite_info.cpp.j2").render(
        model=cpp_string("ceilings"), generator=cpp_string(f"benanza {__version__}")))
    copy_harness(root)
    write_if_changed(root / "CMakeLists.txt", env.get_template("CMakeLists.txt.j2").render(
        sources=["src/suite_info.cpp"], version=__version__, harness_only=False, **harness_sources()))
    write_if_changed(root / "suite.json", json.dumps({"benanza_version": __version__, "precisions": [],
                                                       "models": [], "jobs": [], "sources": ["src/suite_info.cpp"],
                                                       "purpose": "ceilings"}, indent=1) + "\n")
    return root


def measure(exe: str | Path, device: int = 0, timeout_s: float = 600.0):
    """Run ``exe --ceilings`` on ``device``; returns :func:`parse_records`' result. Raises
    :class:`DeviceError` when there is no usable GPU or the run fails."""
    from benanza.runner.run import shared_gpu_turn

    try:
        with shared_gpu_turn(device):  # another benanza command on this GPU: measure in our turn only
            p = subprocess.run([str(exe), "--ceilings", "--device", str(device)], capture_output=True, text=True,
                               timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DeviceError(f"ceilings: no result after {timeout_s:.0f} s") from None
    if p.returncode == 3:
        raise DeviceError((p.stderr.strip().splitlines() or ["no CUDA device"])[-1].replace("benanza-suite: ", ""))
    system, rows, failed = parse_records(p.stdout.splitlines())
    if p.returncode != 0 and not rows:
        raise DeviceError(f"ceilings: the suite exited with code {p.returncode}: "
                          f"{(p.stderr.strip().splitlines() or [''])[-1]}")
    if system is None:
        raise UsageError("ceilings: the suite printed no system record")
    return system, rows, failed
