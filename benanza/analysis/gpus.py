"""GPU specification table: the vendor's figures for GPUs benanza may predict for or draw roofs of.

Every figure is NVIDIA's datasheet value for the board named (``source`` says which document):
SM count, boost clock (MHz), DRAM bandwidth (bytes/s), memory and L2 (bytes), and *dense* peak
math rates (FLOP/s) per precision: ``fp32`` on the CUDA cores (FMA = 2 FLOPs), ``tf32``, ``fp16``,
``bf16`` and ``fp8`` on the Tensor Cores. NVIDIA's datasheets quote Tensor Core rates *with* 2:4
structured sparsity from Ampere on; the table holds those figures halved (``sparse_factor`` = 2
says the datasheet's number is twice the one here). ``None``: the GPU has no Tensor Core path for
that precision (V100 and T4 have no TF32, BF16 or FP8; A100, A10, A40 have no FP8).

Every figure names its source (:meth:`GpuSpec.source_of`, ``to_dict()["sources"]``): the board's
datasheet, else an architecture whitepaper (SM counts, boost clocks, L2 sizes are rarely in
datasheets; an SM count is the datasheet's CUDA cores over the whitepaper's lanes per SM), else
third-party reports, marked so (:data:`DOCS`). Sources disagree on Blackwell (B200, GB200, RTX PRO
6000: SM count, clocks and L2 are not in NVIDIA's datasheets; the FP32 rate of B200 differs
between the HGX datasheet and the architecture brief): those entries say ``uncertain``.
"""
from __future__ import annotations

import dataclasses

import re
from dataclasses import dataclass, field

from benanza.errors import UsageError
from benanza.database import query

T = 1e12
GB = 1e9  # bandwidth: decimal GB/s as the datasheets use
GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's datasheet figures.

    Units: ``boost_clock_mhz`` MHz; ``bandwidth`` DRAM bytes/s; ``memory_bytes``, ``l2_bytes`` bytes;
    ``peak`` FLOP/s per precision, dense (no 2:4 sparsity): ``fp32`` CUDA-core FMA, ``tf32``,
    ``fp16``, ``bf16``, ``fp8`` Tensor Core (``None``: not supported); ``tdp_w`` watts.
    ``aliases``: names ``nvidia-smi`` / ``cudaGetDeviceProperties`` report (``System.gpu_name``) and
    short names users type. ``source``: the NVIDIA document the figures come from.
    """

    name: str
    aliases: tuple[str, ...]
    architecture: str
    compute_capability: str
    sm_count: int
    boost_clock_mhz: int
    bandwidth: float
    memory_bytes: int
    l2_bytes: int
    peak: dict = field(hash=False, compare=False)
    tdp_w: int
    source: str
    fp32_lanes_per_sm: int = 128  # FP32 FMA units per SM (64 on Volta, Turing, GA100)
    note: str = ""
    partition_of: int | None = None  # SMs of the whole GPU when this is a partition (:func:`partition_spec`)
    figure_sources: dict = field(default_factory=dict, hash=False, compare=False)  # figure -> DOCS key

    def source_of(self, figure: str) -> str:
        """The document ``figure`` (one of :data:`FIGURES`, or ``peak.<precision>``) comes from: its
        entry in :data:`DOCS` when the board's datasheet does not give it, else :attr:`source`."""
        key = self.figure_sources.get(figure) or self.figure_sources.get(figure.split(".")[0])
        return DOCS[key] if key else self.source

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s of ``precision`` (fp32: CUDA cores; others: Tensor Cores). Raises
        UsageError when this GPU has no Tensor Core path for it."""
        v = self.peak.get(precision)
        if v is None:
            raise UsageError(f"{self.name} has no {precision} Tensor Core peak (its datasheet lists none)")
        return v

    def ridge(self, precision: str = "fp32") -> float:
        """Ridge point (FLOP/byte) of the roofline in ``precision``: peak / bandwidth."""
        return self.peak_flops(precision) / self.bandwidth

    @property
    def fp32_from_clock(self) -> float:
        """SMs x FP32 lanes x 2 x boost clock (FLOP/s): what the CUDA-core FP32 peak should be."""
        return self.sm_count * self.fp32_lanes_per_sm * 2 * self.boost_clock_mhz * 1e6

    def to_dict(self) -> dict:
        return {"name": self.name, "architecture": self.architecture,
                "compute_capability": self.compute_capability, "sm_count": self.sm_count,
                "boost_clock_mhz": self.boost_clock_mhz, "bandwidth_bytes_per_s": self.bandwidth,
                "memory_bytes": self.memory_bytes, "l2_bytes": self.l2_bytes,
                "peak_flops_per_s": dict(self.peak), "tdp_w": self.tdp_w, "source": self.source,
                "sources": {f: self.source_of(f) for f in FIGURES}, "note": self.note or None}


#: the figures of a :class:`GpuSpec` that name a source (``peak`` covers every precision)
FIGURES = ("sm_count", "boost_clock_mhz", "bandwidth", "memory_bytes", "l2_bytes", "peak", "tdp_w")

#: documents the figures come from where a board's datasheet (``GpuSpec.source``) does not give
#: them: architecture whitepapers, and third-party reports where NVIDIA publishes nothing
DOCS = {
    "volta-wp": "NVIDIA Tesla V100 GPU Architecture whitepaper (Table 1: 80 SMs, 1530 MHz boost, 6144 KB L2), "
                "https://www.nvidia.com/en-us/data-center/volta-gpu-architecture/",
    "turing-wp": "NVIDIA Turing GPU Architecture whitepaper (TU104: 4096 KB L2; Tesla T4: 40 SMs, 1590 MHz boost), "
                 "https://www.nvidia.com/en-us/design-visualization/technologies/turing-architecture/",
    "ampere-wp": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (A100: 108 SMs, 1410 MHz boost, 40 MB L2), "
                 "https://www.nvidia.com/en-us/data-center/ampere-architecture/",
    "ga102-wp": "NVIDIA Ampere GA102 GPU Architecture whitepaper (GA102: 128 FP32 lanes per SM, 6144 KB L2), "
                "https://www.nvidia.com/en-us/data-center/ampere-architecture/",
    "ada-wp": "NVIDIA Ada GPU Architecture whitepaper (128 FP32 lanes per SM; AD102 96 MB L2, AD104 48 MB L2), "
              "https://www.nvidia.com/en-us/geforce/ada-lovelace-architecture/",
    "hopper-wp": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (H100 SXM5: 132 SMs; PCIe: 114 SMs; 50 MB L2; "
                 "boost clocks), https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper",
    "cores": "the board datasheet's CUDA core count over the architecture's FP32 lanes per SM (whitepaper)",
    "third-party": "third-party reports (nvidia-smi / deviceQuery of shipping boards, TechPowerUp GPU database, "
                   "https://www.techpowerup.com/gpu-specs/): NVIDIA publishes no such figure for this board",
}


def _fs(**figures: str) -> dict:
    """figure -> DOCS key, checked."""
    for f, k in figures.items():
        if f.split(".")[0] not in FIGURES or k not in DOCS:
            raise ValueError(f"bad figure source {f}={k}")
    return figures


#: datasheet sparse figures are twice the dense ones stored here (Ampere and later Tensor Cores)
SPARSE_FACTOR = 2


def _p(fp32, tf32=None, fp16=None, bf16=None, fp8=None) -> dict:
    return {"fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": bf16, "fp8": fp8}


GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("V100-SXM2", ("Tesla V100-SXM2-32GB", "Tesla V100-SXM2-16GB", "V100"), "Volta", "7.0",
            80, 1530, 900 * GB, 32 * GiB, 6 * MiB, _p(15.7 * T, fp16=125 * T), 300,
            "NVIDIA Tesla V100 GPU Accelerator datasheet (SXM2: FP32 15.7 TFLOPS, Tensor 125 TFLOPS, "
            "900 GB/s), https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
            fp32_lanes_per_sm=64, note="Volta Tensor Cores are FP16 only; there is no sparsity",
            figure_sources=_fs(sm_count="volta-wp", boost_clock_mhz="volta-wp", l2_bytes="volta-wp")),
    GpuSpec("T4", ("Tesla T4", "NVIDIA T4"), "Turing", "7.5",
            40, 1590, 320 * GB, 16 * GiB, 4 * MiB, _p(8.1 * T, fp16=65 * T), 70,
            "NVIDIA T4 Tensor Core GPU datasheet (FP32 8.1 TFLOPS, mixed FP16/FP32 65 TFLOPS, 320 GB/s), "
            "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
            fp32_lanes_per_sm=64,
            figure_sources=_fs(sm_count="turing-wp", boost_clock_mhz="turing-wp", l2_bytes="turing-wp")),
    GpuSpec("V100-PCIe-32GB", ("Tesla V100-PCIE-32GB", "Tesla V100-PCIE-16GB", "V100 PCIe"), "Volta", "7.0",
            80, 1380, 900 * GB, 32 * GiB, 6 * MiB, _p(14 * T, fp16=112 * T), 250,
            "NVIDIA Tesla V100 GPU Accelerator datasheet (PCIe: 5,120 CUDA cores, FP32 14 TFLOPS, Tensor 112 "
            "TFLOPS, 32/16 GB HBM2, 900 GB/s, 250 W), https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
            fp32_lanes_per_sm=64, note="Volta Tensor Cores are FP16 only; there is no sparsity",
            figure_sources=_fs(sm_count="cores", boost_clock_mhz="third-party", l2_bytes="volta-wp")),
    GpuSpec("A100-SXM4-80GB", ("NVIDIA A100-SXM4-80GB", "A100", "A100 SXM"), "Ampere", "8.0",
            108, 1410, 2039 * GB, 80 * GiB, 40 * MiB, _p(19.5 * T, 156 * T, 312 * T, 312 * T), 400,
            "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM: TF32 156/312* , FP16/BF16 312/624* TFLOPS, "
            "2,039 GB/s; * with sparsity), https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
            fp32_lanes_per_sm=64,
            figure_sources=_fs(sm_count="ampere-wp", boost_clock_mhz="ampere-wp", l2_bytes="ampere-wp")),
    GpuSpec("A100-PCIe-80GB", ("NVIDIA A100 80GB PCIe", "A100 PCIe", "A100 80GB PCIe"), "Ampere", "8.0",
            108, 1410, 1935 * GB, 80 * GiB, 40 * MiB, _p(19.5 * T, 156 * T, 312 * T, 312 * T), 300,
            "NVIDIA A100 Tensor Core GPU datasheet (80GB PCIe: TF32 156/312*, FP16/BF16 312/624* TFLOPS, "
            "1,935 GB/s, 300 W; * with sparsity), https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
            fp32_lanes_per_sm=64,
            figure_sources=_fs(sm_count="ampere-wp", boost_clock_mhz="ampere-wp", l2_bytes="ampere-wp")),
    GpuSpec("A10", ("NVIDIA A10",), "Ampere", "8.6",
            72, 1695, 600 * GB, 24 * GiB, 6 * MiB, _p(31.2 * T, 62.5 * T, 125 * T, 125 * T), 150,
            "NVIDIA A10 Tensor Core GPU datasheet (FP32 31.2, TF32 62.5/125*, FP16/BF16 125/250* TFLOPS, "
            "600 GB/s; * with sparsity), https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf",
            figure_sources=_fs(sm_count="cores", boost_clock_mhz="third-party", l2_bytes="ga102-wp")),
    GpuSpec("L4", ("NVIDIA L4",), "Ada Lovelace", "8.9",
            58, 2040, 300 * GB, 24 * GiB, 48 * MiB, _p(30.3 * T, 60 * T, 121 * T, 121 * T, 242.5 * T), 72,
            "NVIDIA L4 Tensor Core GPU datasheet (FP32 30.3, TF32 120*, FP16/BF16 242*, FP8 485* TFLOPS, "
            "300 GB/s; * with sparsity, halved here), https://www.nvidia.com/en-us/data-center/l4/",
            figure_sources=_fs(sm_count="cores", boost_clock_mhz="third-party", l2_bytes="ada-wp")),
    GpuSpec("L40S", ("NVIDIA L40S",), "Ada Lovelace", "8.9",
            142, 2520, 864 * GB, 48 * GiB, 96 * MiB, _p(91.6 * T, 183 * T, 366.5 * T, 366.5 * T, 733 * T), 350,
            "NVIDIA L40S GPU datasheet (FP32 91.6, TF32 366*, FP16/BF16 733*, FP8 1,466* TFLOPS, 864 GB/s; "
            "* with sparsity, halved here), https://www.nvidia.com/en-us/data-center/l40s/",
            note="the datasheet's dense FP16 figure (362.05) is not half its sparse one (733): half used",
            figure_sources=_fs(sm_count="cores", boost_clock_mhz="third-party", l2_bytes="ada-wp")),
    GpuSpec("H100-PCIe", ("NVIDIA H100 PCIe", "H100 PCIe"), "Hopper", "9.0",
            114, 1755, 2000 * GB, 80 * GiB, 50 * MiB, _p(51.2 * T, 378 * T, 756 * T, 756 * T, 1513 * T), 350,
            "NVIDIA H100 Tensor Core GPU datasheet (PCIe: FP32 51, TF32 756*, FP16/BF16 1,513*, FP8 3,026* "
            "TFLOPS, 2 TB/s; * with sparsity, halved here), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
            figure_sources=_fs(sm_count="hopper-wp", boost_clock_mhz="hopper-wp", l2_bytes="hopper-wp")),
    GpuSpec("H100-SXM", ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", "H100 SXM5"), "Hopper", "9.0",
            132, 1980, 3350 * GB, 80 * GiB, 50 * MiB, _p(66.9 * T, 494.7 * T, 989.4 * T, 989.4 * T, 1978.9 * T), 700,
            "NVIDIA H100 Tensor Core GPU datasheet (SXM: FP32 67, TF32 989*, FP16/BF16 1,979*, FP8 3,958* "
            "TFLOPS, 3.35 TB/s; * with sparsity, halved here), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
            figure_sources=_fs(sm_count="hopper-wp", boost_clock_mhz="hopper-wp", l2_bytes="hopper-wp")),
    GpuSpec("H200", ("NVIDIA H200", "H200 SXM", "NVIDIA H200 SXM"), "Hopper", "9.0",
            132, 1980, 4800 * GB, 141 * 10 ** 9, 50 * MiB, _p(66.9 * T, 494.7 * T, 989.4 * T, 989.4 * T, 1978.9 * T), 700,
            "NVIDIA H200 Tensor Core GPU datasheet (SXM: FP32 67, TF32 989*, FP16/BF16 1,979*, FP8 3,958* "
            "TFLOPS, 141 GB, 4.8 TB/s; * with sparsity, halved here), https://www.nvidia.com/en-us/data-center/h200/",
            figure_sources=_fs(sm_count="hopper-wp", boost_clock_mhz="hopper-wp", l2_bytes="hopper-wp")),
    GpuSpec("B200", ("NVIDIA B200", "HGX B200"), "Blackwell", "10.0",
            148, 1965, 8000 * GB, 180 * 10 ** 9, 126 * MiB, _p(80 * T, 1100 * T, 2250 * T, 2250 * T, 4500 * T), 1000,
            "NVIDIA HGX B200 datasheet, per GPU (TF32 2.2*, FP16/BF16 4.5*, FP8 9* PFLOPS, 8 TB/s, 180 GB "
            "HBM3e, 1,000 W; * with sparsity, halved here) and NVIDIA Blackwell architecture technical brief "
            "(FP32 80 TFLOPS), https://www.nvidia.com/en-us/data-center/hgx/",
            note="uncertain: NVIDIA's datasheet gives neither SM count nor clocks; 148 SMs (2 dies x 74) "
                 "and 1,965 MHz boost are from third-party nvidia-smi reports and disagree with the FP32 "
                 "80 TFLOPS figure by ~7% (148 x 128 x 2 x 1.965 GHz = 74.4 TFLOPS); the L2 size (126 MB) "
                 "is also third-party; memory was announced as 192 GB and ships as 180 GB",
            figure_sources=_fs(sm_count="third-party", boost_clock_mhz="third-party", l2_bytes="third-party")),
    GpuSpec("A40", ("NVIDIA A40",), "Ampere", "8.6",
            84, 1740, 696 * GB, 48 * GiB, 6 * MiB, _p(37.4 * T, 74.8 * T, 149.7 * T, 149.7 * T), 300,
            "NVIDIA A40 datasheet (10,752 CUDA cores; FP32 37.4, TF32 74.8/149.6*, BF16/FP16 149.7/299.4* TFLOPS; "
            "48 GB GDDR6, 696 GB/s, 300 W; * with sparsity), https://www.nvidia.com/en-us/data-center/a40/",
            figure_sources=_fs(sm_count="cores", boost_clock_mhz="third-party", l2_bytes="ga102-wp")),
    GpuSpec("RTX-6000-Ada", ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"), "Ada Lovelace", "8.9",
            142, 2505, 960 * GB, 48 * GiB, 96 * MiB, _p(91.1 * T, 182.1 * T, 364.25 * T, 364.25 * T, 728.5 * T), 300,
            "NVIDIA RTX 6000 Ada Generation datasheet (18,176 CUDA cores; FP32 91.1 TFLOPS; Tensor 1,457 TFLOPS "
            "= FP8 with sparsity, so FP8 728.5, FP16/BF16 364.25, TF32 182.1 dense by Ada's 2:1 steps; 48 GB "
            "GDDR6, 960 GB/s, 300 W), https://www.nvidia.com/en-us/design-visualization/rtx-6000/",
            figure_sources=_fs(sm_count="cores", boost_clock_mhz="third-party", l2_bytes="ada-wp")),
    GpuSpec("GB200", ("NVIDIA GB200", "GB200 NVL72"), "Blackwell", "10.0",
            148, 1965, 8000 * GB, 186 * 10 ** 9, 126 * MiB, _p(90 * T, 1250 * T, 2500 * T, 2500 * T, 5000 * T), 1200,
            "NVIDIA GB200 NVL72 datasheet, per GPU of the rack's 72 (FP16/BF16 360, FP8 720, TF32 180 PFLOPS "
            "with sparsity, 576 TB/s, 13.4 TB HBM3e; halved and divided here) and NVIDIA Blackwell architecture "
            "technical brief (GB200 FP32 90 TFLOPS per GPU), https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
            note="uncertain: the B200 of a GB200 at 1,200 W; NVIDIA gives neither SM count, clocks nor L2: "
                 "B200's third-party 148 SMs, 1,965 MHz and 126 MB are used and give 74.4 TFLOPS FP32, not the 90 "
                 "NVIDIA quotes (a higher clock at 1,200 W, not published)",
            figure_sources=_fs(sm_count="third-party", boost_clock_mhz="third-party", l2_bytes="third-party")),
    GpuSpec("RTX-PRO-6000", ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                             "NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell"),
            "Blackwell", "12.0",
            188, 2617, 1792 * GB, 96 * GiB, 128 * MiB, _p(125 * T, 250 * T, 500 * T, 500 * T, 1000 * T), 600,
            "NVIDIA RTX PRO 6000 Blackwell datasheet (24,064 CUDA cores; FP32 125 TFLOPS; AI 4,000 TOPS = FP4 "
            "with sparsity, so FP8 1,000, FP16/BF16 500, TF32 250 dense by Blackwell's 2:1 steps; 96 GB GDDR7, "
            "1,792 GB/s, 600 W), https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/",
            note="uncertain: the Tensor Core rates are derived from the FP4 AI TOPS figure (the datasheet gives "
                 "no FP16 rate); boost clock and L2 are third-party",
            figure_sources=_fs(sm_count="cores", boost_clock_mhz="third-party", l2_bytes="third-party")),
)


#: a partitioned system's GPU name: the database's one pattern (:data:`benanza.database.query.PARTITION_NAME`)
PARTITION_NAME = query.PARTITION_NAME


def partition_spec(spec: GpuSpec, sm_count: int) -> GpuSpec:
    """``spec`` confined to ``sm_count`` of its SMs (a CUDA green context, as ``BENANZA_SM_COUNT``
    runs the harness): the math peaks scale by sm_count / SMs (each SM brings its own CUDA and Tensor
    Cores); DRAM, its datasheet bandwidth, memory and L2 are the whole GPU's (a partition shares
    them; how much of the bandwidth k SMs can draw is :mod:`benanza.analysis.predict`'s business).
    ``spec`` itself when ``sm_count`` is all its SMs. Raises UsageError for a count outside 1..SMs."""
    if not 0 < sm_count <= spec.sm_count:
        raise UsageError(f"{spec.name} has {spec.sm_count} SMs: no partition of {sm_count}")
    if sm_count == spec.sm_count:
        return spec
    f = sm_count / spec.sm_count
    return dataclasses.replace(
        spec, name=f"{spec.name} [{sm_count} SMs]", aliases=(), sm_count=sm_count,
        peak={k: (v * f if v is not None else None) for k, v in spec.peak.items()},
        source=f"{spec.source}; confined to {sm_count} of its {spec.sm_count} SMs: math peaks x {sm_count}/{spec.sm_count}",
        partition_of=spec.sm_count)


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower().replace("nvidia", "").replace("tesla", ""))


def find_gpu(name: str) -> GpuSpec:
    """The spec for ``name``: a ``System.gpu_name`` ("NVIDIA H200", "NVIDIA H100 80GB HBM3") or a
    user string ("h100-sxm", "A100", "b200"), matched case- and punctuation-insensitively: an exact
    name or alias first, else the one GPU whose name or alias contains ``name``. Raises
    UsageError (listing the known names) when nothing or more than one GPU matches. A name ending
    in ``[N SMs]`` (a partitioned system's) is that GPU's :func:`partition_spec` of N SMs."""
    part = PARTITION_NAME.match((name or "").strip())
    if part:
        return partition_spec(find_gpu(part["base"]), int(part["sms"]))
    q = _norm(name or "")
    known = ", ".join(g.name for g in GPUS)
    if not q:
        raise UsageError(f"no GPU name given (known GPUs: {known})")
    for g in GPUS:
        if q == _norm(g.name) or any(q == _norm(a) for a in g.aliases):
            return g
    hits = [g for g in GPUS if any(q in _norm(n) for n in (g.name, *g.aliases))]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise UsageError(f"GPU {name!r} is ambiguous: {', '.join(g.name for g in hits)}")
    raise UsageError(f"unknown GPU {name!r} (known GPUs: {known})")


def with_measured_ceilings(spec: GpuSpec, measured: dict) -> GpuSpec:
    """``spec`` with the roofs measured by `benanza ceilings` on the system (``measured``: name ->
    a row with ``.value``): DRAM bandwidth from the device copy, the fp32 peak from the faster of
    the FMA kernel and the FP32 GEMM, tf32/fp16/bf16 from the library GEMM rates (fp8 stays the
    datasheet's). Raises UsageError when the system has no measured bandwidth."""
    if "dram_bandwidth" not in measured:
        raise UsageError("no measured ceilings for this system: run `benanza ceilings` on it first "
                         "(or use --ceilings spec)")
    peak = dict(spec.peak)
    fp32 = [measured[k].value for k in ("fma_fp32", "gemm_fp32") if k in measured]
    if fp32:
        peak["fp32"] = max(fp32)
    for prec in ("tf32", "fp16", "bf16"):
        if f"gemm_{prec}" in measured:
            peak[prec] = measured[f"gemm_{prec}"].value
    return dataclasses.replace(spec, bandwidth=measured["dram_bandwidth"].value, peak=peak,
                               source="measured by `benanza ceilings` on this system (fp8: " + spec.source + ")")
