"""The training step's Benanza ratio: benanza's training-step LBL against the GPU kernel time of
the training step PyTorch ran (``benanza torch SPEC --train``, docs/training.md).

PyTorch's side (:class:`benanza.profiles.train_join.TrainJoin`): the step's kernel time, the sum of
the kernels (``kind == "kernel"``; memcpys and memsets reported apart) of one profiled iteration,
median and IQR over iterations, as ``benchmarks/train_step.py`` counts it; and its split as
benanza counts the step (:meth:`TrainJoin.comparable_ms`: forward, loss forward + gradient, the
model's gradients, optimizer, other).

benanza's side (:class:`benanza.analysis.training.TrainingStep`): the LBL (critical path, the
headline) and the sequential sum, and per phase ``forward``, ``loss``, ``backward`` (data +
weight gradients) and ``optimizer``.

**Step Benanza ratio** = LBL (critical path) / PyTorch's step kernel time; also the sequential
LBL's ratio and one per phase. A ratio of an incomplete LBL (a partial sum) is marked: its
``complete`` is False and the text says ``INCOMPLETE``; a phase benanza has no time for has no
ratio (None). A ratio above 1 means PyTorch ran faster than the bound: a defect of benanza.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def is_native_bf16_batch_norm(kernel_name: str) -> bool:
    """A batch-norm kernel of ATen's own on bf16 data (``at::native::batch_norm_..._kernel<c10::BFloat16, ...>``),
    which PyTorch runs where it refuses cuDNN's batch norm (:meth:`TrainComparison.framework_choices`)."""
    return "at::native::" in kernel_name and "batch_norm" in kernel_name and "BFloat16" in kernel_name


#: benanza's phases held against PyTorch's (:meth:`TrainJoin.comparable_ms` groups)
COMPARED = ("forward", "loss", "backward", "optimizer")


@dataclass
class TrainComparison:
    """One profiled training step against benanza's training step (module doc). ``join``: the
    :class:`~benanza.profiles.train_join.TrainJoin`; ``step``: the
    :class:`~benanza.analysis.training.TrainingStep`; ``run``: what was profiled (free-form);
    ``whatif``: the step's what-if composition
    (:class:`benanza.analysis.train_whatif.StepWhatIf`), None when not composed; ``system``: the
    :class:`benanza.database.store.System` benanza's step was measured on."""

    join: object
    step: object
    run: dict = field(default_factory=dict)
    whatif: object = None
    system: object = None

    def uncovered_ops(self) -> dict[str, float]:
        """Framework ops of the forward whose forward or backward kernels reached no layer of the
        export, with their kernel time per step (ms, mean over iterations), heaviest first."""
        n = max(len(self.join.iterations), 1)
        acc: dict[str, float] = {}
        for k in self.join.kernels:
            if k.kind == "kernel" and k.iteration in self.join.iterations and k.role in ("forward", "backward") \
                    and k.layer is None and k.forward_op:
                acc[k.forward_op] = acc.get(k.forward_op, 0.0) + k.dur_ms / n
        return dict(sorted(acc.items(), key=lambda kv: -kv[1]))

    def missing_layers_note(self) -> str:
        """Empty, or why benanza's step lacks layers PyTorch's step runs: batch norms or dropouts
        the export folded or removed (an inference export folds a batch norm into its convolution,
        and drops a dropout), whose training forward and backward benanza's step then does not
        have: the step's LBL is then a partial sum (INCOMPLETE)."""
        from benanza.profiles.join import BATCH_NORM_OPS

        miss = {op: ms for op, ms in self.uncovered_ops().items() if op in BATCH_NORM_OPS or "dropout" in op}
        if not miss:
            return ""
        return ("PyTorch's step runs layers the export folded or removed, which benanza's step lacks ("
                + ", ".join(f"{op} {ms:.4f} ms" for op, ms in miss.items())
                + " of kernels per step): export the model with them kept")

    def framework_choices(self) -> list[dict]:
        """Where the step ran a slower implementation that PyTorch's own selection rule chose, for a
        reason the rule states (ms per step). One rule, measured in the training truth table (an
        H200, PyTorch 2.11, cuDNN 9.19; docs/training.md):

        * ``native_batch_norm_bf16``: batch norms on bf16 input run ATen's own kernels
          (``at::native::batch_norm_collect_statistics_kernel``, ``batch_norm_transform_input_kernel``,
          ``batch_norm_backward_kernel``, ...), because ATen selects cuDNN's batch norm only for other
          input types (``_select_batch_norm_backend``, ``aten/src/ATen/native/Normalization.cpp``:
          ``input.scalar_type() != at::kBFloat16``); AMP-bf16 feeds every batch norm bf16. resnet50
          at batch 32: 4.117 ms of native backward kernels a step, where the AMP-fp16 step's cuDNN
          ``bn_bw_1C11_kernel_new`` took 1.952 ms.

        Each entry: ``rule``, ``layers`` (how many), ``pytorch_ms`` (those kernels' time, median over
        iterations), ``lbl_ms`` (benanza's bound of the same layers' training forward and backward
        batch-norm calls, every implementation the database timed, cuDNN's included; None when one
        has no valid measurement), ``saving_ms`` (``pytorch_ms - lbl_ms``, at least 0; None
        without ``lbl_ms``), ``text`` (one sentence) and ``source``."""
        def native_bn(k) -> bool:
            return k.kind == "kernel" and is_native_bf16_batch_norm(k.name)

        if not any(native_bn(k) and k.iteration in self.join.iterations for k in self.join.kernels):
            return []
        layers = sorted({k.layer for k in self.join.kernels if native_bn(k) and k.layer is not None})
        ms = self.join.kernels_ms(native_bn)["median_ms"]
        calls = [c for c in self.step.calls if c.layer in set(layers) and c.kind in ("BatchNormTrain", "BatchNormBwd")]
        lbl = None if not calls or any(c.time_ms is None for c in calls) else sum(c.time_ms for c in calls)
        save = None if lbl is None else max(0.0, ms - lbl)
        which = f"{len(layers)} layers" if layers else "batch norms of no layer of the export"
        text = (f"PyTorch ran its own batch-norm kernels on bf16 input ({which}, {ms:.4f} ms a step): "
                "ATen takes cuDNN's batch norm only for fp16 and fp32 input; "
                + (f"benanza's bound of these batch norms is {lbl:.4f} ms ({save:.4f} ms to gain, e.g. with AMP-fp16)"
                   if lbl is not None else "benanza's bound of these batch norms is not measured"))
        return [{"rule": "native_batch_norm_bf16", "layers": len(layers), "pytorch_ms": ms, "lbl_ms": lbl,
                 "saving_ms": save, "text": text,
                 "source": "PyTorch aten/src/ATen/native/Normalization.cpp, _select_batch_norm_backend"}]

    @property
    def complete(self) -> bool:
        """benanza's step is complete and has every layer PyTorch's step ran (:meth:`missing_layers_note`)."""
        return self.step.complete and not self.missing_layers_note()

    @property
    def step_kernel_ms(self) -> float | None:
        return self.join.step_ms()["median_ms"]

    def phase_lbl_ms(self) -> dict[str, float | None]:
        """benanza's time per compared phase (ms; None where unmeasured or not counted)."""
        ph = self.step.phase_ms
        bd, bw = ph.get("backward_data"), ph.get("backward_weight")
        return {"forward": ph.get("forward"), "loss": ph.get("loss"),
                "backward": None if bd is None or bw is None else bd + bw, "optimizer": ph.get("optimizer")}

    def phase_complete(self) -> dict[str, bool]:
        """Whether benanza's time of each compared phase is a whole bound (no call of it missing)."""
        s = self.step
        fwd_calls = [c for c in s.missing_calls if c.phase == "forward"]
        bwd_calls = [c for c in s.missing_calls if c.phase != "forward"]
        return {"forward": not s.forward_missing and not fwd_calls, "loss": bool(s.loss_measured),
                "backward": not bwd_calls and not s.no_backward,
                "optimizer": s.phase_ms.get("optimizer") is not None}

    @staticmethod
    def _ratio(lbl: float | None, ms: float | None) -> float | None:
        if lbl is None or not ms:
            return None
        return lbl / ms

    def ratios(self) -> dict:
        """``step`` (critical path), ``step_sequential`` and each compared phase:
        ``{"lbl_ms", "pytorch_ms", "ratio", "complete"}``."""
        pt = self.join.comparable_ms()
        ok = self.phase_complete()
        lbl = self.phase_lbl_ms()
        whole = self.complete
        out = {"step": {"lbl_ms": self.step.critical_path_ms, "pytorch_ms": self.step_kernel_ms,
                        "ratio": self._ratio(self.step.critical_path_ms, self.step_kernel_ms), "complete": whole},
               "step_sequential": {"lbl_ms": self.step.sequential_ms, "pytorch_ms": self.step_kernel_ms,
                                   "ratio": self._ratio(self.step.sequential_ms, self.step_kernel_ms),
                                   "complete": whole}}
        folded = bool(self.missing_layers_note())
        for p in COMPARED:
            out[p] = {"lbl_ms": lbl[p], "pytorch_ms": pt[p]["median_ms"], "ratio": self._ratio(lbl[p], pt[p]["median_ms"]),
                      "complete": ok[p] and lbl[p] is not None and not (folded and p in ("forward", "backward"))}
        return out

    def ratio_text(self, digits: int = 3) -> str:
        """``step Benanza ratio 0.712 (LBL 10.1234 ms / PyTorch step kernels 14.2120 ms)``, with
        ``INCOMPLETE: ...`` when benanza's step is a partial sum."""
        r = self.ratios()["step"]
        if r["ratio"] is None:
            return "step Benanza ratio: none (no kernel time in the profiled step)"
        mark = f" {self.incomplete_note}" if not self.complete else ""
        above = " above 1: not a bound" if r["ratio"] > 1 and self.complete else ""
        return (f"step Benanza ratio {r['ratio']:.{digits}f} (LBL {r['lbl_ms']:.4f} ms / PyTorch step kernels "
                f"{r['pytorch_ms']:.4f} ms){above}{mark}")

    def layer_rows(self) -> list[dict]:
        """Per layer PyTorch ran kernels for (:meth:`TrainJoin.layer_ms`): its forward and backward
        kernel time (ms, medians) beside benanza's backward bound of the layer (``lbl_backward_ms``:
        the sum of its backward calls, data and weight gradients; None when the layer has no
        backward call or one of them has no measurement)."""
        calls: dict = {}
        missing = set()
        for c in self.step.calls:
            if c.phase == "forward":
                continue
            if c.time_ms is None:
                missing.add(c.layer)
            calls[c.layer] = calls.get(c.layer, 0.0) + (c.time_ms or 0.0)
        rows = []
        for r in self.join.layer_ms():
            i = r["layer"]
            rows.append({**r, "lbl_backward_ms": None if i in missing or i not in calls else calls[i]})
        return rows

    @property
    def incomplete_note(self) -> str:
        """Empty when :attr:`complete`; else ``INCOMPLETE: ...`` naming what benanza's step lacks."""
        if self.complete:
            return ""
        parts = [self.step.incomplete_note.removeprefix("INCOMPLETE: ").removesuffix(" (a partial sum, not a bound)")] \
            if not self.step.complete else []
        if self.missing_layers_note():
            parts.append(self.missing_layers_note())
        return "INCOMPLETE: " + "; ".join(parts) + " (a partial sum, not a bound)"

    def to_dict(self) -> dict:
        return {"run": dict(self.run), "pytorch": self.join.to_dict(), "benanza": self.step.to_dict(),
                "ratios": self.ratios(), "layers": self.layer_rows(), "step_benanza_ratio": self.ratios()["step"]["ratio"],
                "uncovered_ops": self.uncovered_ops(), "framework_choices": self.framework_choices(),
                "complete": self.complete, "incomplete_note": self.incomplete_note or None,
                "ratio_text": self.ratio_text(),
                "whatif": self.whatif.to_dict() if self.whatif is not None else None,
                "headline": self.headline()}

    def headline(self) -> str:
        """The report's first line: the what-if's sentence
        (:meth:`benanza.analysis.train_whatif.StepWhatIf.headline`), else the ratio's text."""
        if self.whatif is None:
            return self.ratio_text()
        r = self.run or {}
        what = " ".join(str(x) for x in (r.get("spec") or self.step.model, f"batch {self.step.batch}",
                                         r.get("dtype") or self.step.precision_label) if x)
        return self.whatif.headline(what)
