"""The hardware counters of each layer's best implementation, as `benanza bench --counters` stored
them (:mod:`benanza.database.counters`), beside the layer's roofline: how far the layer is from its
roof and why (:func:`benanza.database.counters.summarize`). Printed by :mod:`benanza.reports.counters`."""
from __future__ import annotations

from benanza.database.counters import implementation_key, read_counters, summarize


def counter_rows(analysis, database, system) -> list[dict]:
    """One row per measured layer config of ``analysis`` whose best implementation has stored
    counters, in model order: index, name, kind, call, algorithm, time_ms, bound_ms (the attainable
    roofline time on the GPU's datasheet ceilings, None when the GPU is not in the spec table),
    x_bound (time / bound), min_bytes and the :class:`benanza.database.counters.CounterSummary`
    fields (DRAM bytes measured, DRAM %, SM %, occupancy %, kernels, bound, why). [] when none."""
    from benanza.analysis.gpus import find_gpu
    from benanza.analysis.roofline import min_bytes
    from benanza.errors import UsageError
    from benanza.analysis.layer_roofline import model_roofline

    layers = [lt for lt in analysis.layers if lt.status == "measured" and not lt.conversion]
    stored = read_counters(database, system.id, sorted({lt.layer.key for lt in layers}))
    if not stored:
        return []
    try:
        att = {x.index: x.attainable_ms for x in model_roofline(analysis, find_gpu(system.gpu_name)).layers}
    except UsageError:
        att = {}
    out, seen = [], set()
    for lt in layers:
        key = implementation_key(lt, analysis.kind_precision(lt.layer.config.kind))
        if key in seen or key not in stored:
            continue
        seen.add(key)
        s = summarize(stored[key])
        bound = att.get(lt.layer.index)
        out.append({"index": lt.layer.index, "name": lt.layer.name, "kind": lt.layer.config.kind, "call": lt.call,
                    "algorithm": lt.algorithm, "time_ms": lt.time_ms, "bound_ms": bound,
                    "x_bound": lt.time_ms / bound if bound else None, "min_bytes": min_bytes(lt.layer.config, key[1]),
                    **s.to_dict()})
    return out
