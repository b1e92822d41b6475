"""The routing scenario of transformers' ``eager`` experts: the data-dependent token counts of its
per-expert loop bound to the routing benanza states for every mixture of experts.

transformers' eager experts (``?_experts_implementation=eager``; the ``Experts.forward`` of
``transformers/models/*_moe``) loop over the experts the routing hit::

    mask = one_hot(top_k_index, E).permute(2, 1, 0)          # [E, k, T]
    hit = (mask.sum((-1, -2)) > 0).nonzero()                 # the experts given rows
    for e in hit:
        top_k_pos, token_idx = where(mask[e])                # the expert's rows: NonZero
        y = linear(act(linear(x[token_idx], w1[e])) ..., w2[e]) * weights[token_idx, top_k_pos]
        out.index_add_(0, token_idx, y)

An export traces the loop: it holds one body per expert the trace's (random) routing hit, ``K`` of
``E``, and each body's rows are a ``NonZero``'s length, unknown to shape inference, so every expert
GEMM after it has no shape. :func:`bind_eager_routing` finds each ``OneHot`` of the router's top-k
ids, the ``NonZero`` of the hit experts (length: the ``K`` bodies the graph has) and each body's
``NonZero`` (its rows), and gives them the shapes of the ``balanced`` routing
(:func:`benanza.kinds.grouped_gemm.balanced_counts`: S = T x k rows spread as evenly as they go over
min(E, S) experts; body i, in graph order, takes expert i's rows), so inference and folding give every
layer of the loop its shape. A body the routing gives no rows has empty outputs (zero-cost layers: the
loop does not run it). Where the routing gives rows to more experts than the trace hit, those rows are
not in the graph: the notice says so and the LBL counts the traced experts only.
"""
from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass

from benanza.kinds.grouped_gemm import balanced_counts
from benanza.processing.graph import infer_and_fold_shapes, inferred_shapes
from benanza.lazy import LazyModule

onnx = LazyModule("onnx")

#: ops the expert mask flows through to the NonZero nodes (their first input: the mask's data)
_MASK_OPS = {"Transpose", "ReduceSum", "Greater", "Gather", "Cast", "Squeeze", "Unsqueeze", "Reshape", "Not",
             "Equal", "Slice"}


@dataclass(frozen=True)
class EagerLoop:
    """One traced eager experts loop: ``tokens`` T, ``top_k`` k, ``experts`` E, the ``counts`` of rows
    each traced body gets (graph order) under ``routing``, the routing's rows per expert (``every``, E
    entries) and the outputs of the NonZero nodes whose length the routing sets (``nonzeros``: the hit
    experts' first, then each body's)."""

    tokens: int
    top_k: int
    experts: int
    counts: tuple[int, ...]
    every: tuple[int, ...]
    nonzeros: tuple[str, ...] = ()
    routing: str = "balanced"

    @property
    def traced(self) -> int:
        return len(self.counts)

    @property
    def rows(self) -> int:
        return self.tokens * self.top_k

    @property
    def counted_rows(self) -> int:
        return sum(self.counts)


def _consumers(g: onnx.GraphProto) -> dict[str, list[tuple[int, onnx.NodeProto]]]:
    """Tensor -> (graph index, node) of the nodes that read it as their first input."""
    out: dict[str, list[tuple[int, onnx.NodeProto]]] = collections.defaultdict(list)
    for i, n in enumerate(g.node):
        if n.input:
            out[n.input[0]].append((i, n))
    return out


def _nonzeros_of(mask: str, first_input: dict) -> list[onnx.NodeProto]:
    """The NonZero nodes the mask reaches through :data:`_MASK_OPS` (as their first input), in graph order."""
    seen, todo, found = {mask}, [mask], {}
    while todo:
        for i, n in first_input.get(todo.pop(), ()):
            if n.op_type == "NonZero":
                found[i] = n
            elif n.op_type in _MASK_OPS:
                for o in n.output:
                    if o and o not in seen:
                        seen.add(o)
                        todo.append(o)
    return [found[i] for i in sorted(found)]


def eager_loops(model: onnx.ModelProto) -> list[tuple[EagerLoop, onnx.NodeProto, list[onnx.NodeProto]]]:
    """Each traced eager experts loop of ``model`` (shapes inferred, batch bound): (the loop, its hit
    experts' NonZero, its bodies' NonZero nodes in graph order). A OneHot whose ids' shape is not known
    ``[T, k]``, or whose mask reaches no hit NonZero (input rank 1) and body NonZeros (rank 2), is none."""
    g = model.graph
    shapes = inferred_shapes(model)
    first_input = _consumers(g)
    out = []
    for node in g.node:
        if node.op_type != "OneHot":
            continue
        ids, mask = shapes.get(node.input[0]), shapes.get(node.output[0])
        if ids is None or mask is None or len(ids) != 2 or len(mask) != 3:
            continue
        nz = _nonzeros_of(node.output[0], first_input)
        rank = [len(shapes[n.input[0]]) if shapes.get(n.input[0]) is not None else None for n in nz]
        hit = [n for n, r in zip(nz, rank) if r == 1]
        bodies = [n for n, r in zip(nz, rank) if r == 2]
        if len(hit) != 1 or not bodies:
            continue
        (tokens, k), experts = ids, mask[-1]
        every = balanced_counts(tokens * k, experts)
        counts = tuple(every[i] if i < len(every) else 0 for i in range(len(bodies)))
        names = (hit[0].output[0],) + tuple(n.output[0] for n in bodies)
        out.append((EagerLoop(tokens=tokens, top_k=k, experts=experts, counts=counts, every=every, nonzeros=names),
                    hit[0], bodies))
    return out


def bind_eager_routing(model: onnx.ModelProto) -> list[EagerLoop]:
    """Give the NonZero outputs of each traced eager experts loop (:func:`eager_loops`) the shapes of its
    routing (in place: a value_info per output; the graph's other inferred shapes are dropped, so the next
    inference derives them from these). Returns the loops bound (none: the model is untouched)."""
    loops = eager_loops(model)
    if not loops:
        return []
    g = model.graph
    fixed = {}
    for loop, hit, bodies in loops:
        fixed[hit.output[0]] = [1, loop.traced]
        for body, rows in zip(bodies, loop.counts):
            fixed[body.output[0]] = [2, rows]
    del g.value_info[:]
    for name, shape in fixed.items():
        g.value_info.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT64, shape))
    return [loop for loop, _, _ in loops]


@dataclass(frozen=True)
class RoutingPlan:
    """What the model processor knows of the routing before mapping: the eager ``loops`` bound, the
    counts ``benanza torch`` recorded (``recorded``: batch -> experts module -> counts, None without a
    record; :func:`read_routing`), how they were recorded (``how``) and each node's module (``paths``,
    node name -> module path, :func:`benanza.processing.modules.module_paths`; empty without a record)."""

    loops: tuple = ()
    recorded: dict | None = None
    how: str = ""
    paths: dict = dataclasses.field(default_factory=dict)


def with_routing(inferred: tuple, weights: set[str], notices: list[str]) -> tuple:
    """The model processor's step after inference and folding (``inferred``: the model, folded op counts,
    static names, shapes): where the model has eager experts loops (:func:`bind_eager_routing`), their
    rows bound, shapes inferred and folded again and the notice (:func:`eager_notice`) appended to
    ``notices``; the routing counts the model records, read and validated (:func:`read_routing`, which
    raises ModelError for a bad record). Returns (model, folded, static, shapes, :class:`RoutingPlan`)."""
    from benanza.processing.modules import module_paths

    model, folded, static, shapes = inferred
    recorded, how = read_routing(model)
    paths = module_paths(model) if recorded else {}
    loops = bind_eager_routing(model)
    if not loops:
        return model, folded, static, shapes, RoutingPlan((), recorded, how, paths)
    model, more, static, shapes = infer_and_fold_shapes(model, weights)
    notices.append(eager_notice(loops))
    return (model, dict(collections.Counter(folded) + collections.Counter(more)), static, shapes,
            RoutingPlan(tuple(loops), recorded, how, paths))


def state_routing(layers, plan: RoutingPlan, batch: int, path, notices: list[str]) -> None:
    """After mapping, in place: the eager loops' layers state their routing (:func:`state_eager_routing`)
    and the grouped GEMMs take the counts recorded for ``batch`` (:func:`measured_routing`; its note
    appended to ``notices``). Raises ModelError naming ``path`` and the layer for counts that do not fit it."""
    state_eager_routing(layers, list(plan.loops))
    note = measured_routing(layers, plan, batch, path)
    if note:
        notices.append(f"routing: {note}")


def state_eager_routing(layers, loops: list[EagerLoop]) -> None:
    """After mapping, in place: the config of each NonZero layer whose length a loop's routing set says
    which routing it is (``NonZeroConfig.routing``), and the weight slice (a Gather of the experts' 3-D
    weight by the expert's index, and its Transpose) of a body the routing gives no rows becomes
    zero-cost with its MatMul: the loop skips an expert without rows, so neither runs nor reads weights."""
    import math

    from benanza.kinds.nonzero import NonZeroConfig

    if not loops:
        return
    routed = {name: lp.routing for lp in loops for name in lp.nonzeros}
    made = {o: ly for ly in layers for o in ly.outputs}
    readers = collections.Counter(i for ly in layers for i in ly.inputs)
    for ly in layers:
        if isinstance(ly.config, NonZeroConfig) and ly.outputs and ly.outputs[0] in routed:
            ly.config = dataclasses.replace(ly.config, routing=routed[ly.outputs[0]])
        empty = ly.op_type == "MatMul" and ly.status == "zero_cost" and ly.output_shapes[0] is not None \
            and math.prod(ly.output_shapes[0]) == 0 and len(ly.inputs) == 2
        b = made.get(ly.inputs[1]) if empty else None
        chain = [b] if b is not None else []
        if b is not None and b.op_type == "Transpose":
            chain.append(made.get(b.inputs[0]) if b.inputs else None)
        g = chain[-1] if chain else None
        if g is None or g.op_type != "Gather" or len(g.static_inputs) != 1 or not g.input_shapes \
                or len(g.input_shapes[0] or ()) != 3 or any(readers[x.outputs[0]] != 1 for x in chain):
            continue
        for x in chain:
            x.status, x.config, x.reason = "zero_cost", None, "an expert the routing gives no rows: the loop skips it"


def eager_notice(loops: list[EagerLoop]) -> str:
    """The one notice of a model with eager experts loops: traced experts of all, the routing, the rows
    the LBL counts and the rows not in the graph."""
    traced = sum(lp.traced for lp in loops)
    experts = sum(lp.experts for lp in loops)
    rows = sum(lp.rows for lp in loops)
    counted = sum(lp.counted_rows for lp in loops)
    given = sum(sum(1 for c in lp.every if c) for lp in loops)
    per = ", ".join(f"{lp.traced} of {lp.experts}" for lp in loops)
    idle = sum(1 for lp in loops for c in lp.counts if not c)
    text = (f"eager export: {traced} of {experts} experts traced ({per} in {len(loops)} MoE layers; transformers' "
            f"per-expert loop holds only the experts the export's routing hit); each expert's rows bound to "
            f"balanced routing (S = tokens x top-k rows spread evenly over min(E, S) experts: {given} experts given rows)")
    if idle:
        text += f"; {idle} traced experts get no rows (their loop bodies are empty: zero-cost)"
    if counted < rows:
        return (text + f"; the LBL counts the traced experts' {counted} of {rows} rows: the other "
                f"{rows - counted} rows' experts are not in the graph and not measured")
    return text + f"; the LBL counts all {rows} rows"


# ------------------------------------------------------------------ the routing the run measured

#: the model-level ``metadata_props`` key of the routing ``benanza torch`` recorded on the run's own
#: inputs (:func:`routing_doc`; read by :func:`read_routing`)
ROUTING_KEY = "benanza.routing"
#: the format of that value
ROUTING_FORMAT = 1


def routing_doc(batches: dict[int, list[dict]], device: str, dtype: str, seed: int = 0) -> dict:
    """The value :func:`write_routing` stores: per batch, the entries of
    :func:`benanza.processing.modules.expert_counts` (one per experts module: its qualified name,
    ``experts`` E, ``top_k``, ``tokens`` and ``counts``, E ints summing to tokens x top_k), and how
    they were drawn (the forward's ``device``, ``dtype`` and ``seed``)."""
    return {"format": ROUTING_FORMAT, "device": device, "dtype": dtype, "seed": seed,
            "batches": {str(b): entries for b, entries in sorted(batches.items())}}


def write_routing(path, doc: dict) -> None:
    """Store ``doc`` (:func:`routing_doc`) as the JSON value of :data:`ROUTING_KEY` in the model-level
    ``metadata_props`` of the ONNX file at ``path`` (weights stay where they are: read without external
    data, saved with the same references), replacing an earlier one."""
    import json

    m = onnx.load(str(path), load_external_data=False)
    keep = [(p.key, p.value) for p in m.metadata_props if p.key != ROUTING_KEY]
    del m.metadata_props[:]
    for k, v in keep + [(ROUTING_KEY, json.dumps(doc, sort_keys=True, separators=(",", ":")))]:
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(path))


def stored_routing(model: onnx.ModelProto) -> dict | None:
    """The JSON document of :data:`ROUTING_KEY` in ``model`` (None without one; not validated)."""
    import json

    for p in model.metadata_props:
        if p.key == ROUTING_KEY:
            try:
                return json.loads(p.value)
            except ValueError as e:
                return {"error": f"not JSON ({e})"}
    return None


def _entry_counts(entry, where: str) -> tuple[str, tuple[int, ...]]:
    """(module, counts) of one recorded entry, validated: E non-negative ints summing to tokens x
    top_k. Raises ModelError naming ``where`` and the module."""
    from benanza.errors import ModelError

    if not isinstance(entry, dict) or not isinstance(entry.get("module"), str):
        raise ModelError(f"{where}: an entry is not {{module, experts, top_k, tokens, counts}}")
    name = entry["module"]
    fields = [entry.get(f) for f in ("experts", "top_k", "tokens")]
    counts = entry.get("counts")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in fields) \
            or not isinstance(counts, list) \
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        raise ModelError(f"{where}: {name}: experts, top_k and tokens must be positive integers and counts "
                         f"non-negative integers")
    experts, top_k, tokens = fields
    if len(counts) != experts or sum(counts) != tokens * top_k:
        raise ModelError(f"{where}: {name}: {len(counts)} counts summing to {sum(counts)}; its {experts} experts "
                         f"and {tokens} tokens x top-{top_k} need {experts} summing to {tokens * top_k}")
    return name, tuple(counts)


def read_routing(model: onnx.ModelProto) -> tuple[dict | None, str]:
    """The routing ``benanza torch`` recorded in ``model`` (:data:`ROUTING_KEY`), validated: (batch ->
    experts module -> counts, how it was recorded: device, dtype and seed), or (None, "") without a
    record. Raises ModelError (one line naming the entry; the model processor adds the file) for a value
    that is not the format :func:`routing_doc` writes, or counts that are not E non-negative integers
    summing to tokens x top_k."""
    from benanza.errors import ModelError

    doc = stored_routing(model)
    if doc is None:
        return None, ""
    where = f"metadata {ROUTING_KEY}"
    if "error" in doc and len(doc) == 1:
        raise ModelError(f"{where}: {doc['error']}")
    if not isinstance(doc, dict) or doc.get("format") != ROUTING_FORMAT or not isinstance(doc.get("batches"), dict):
        raise ModelError(f"{where}: not format {ROUTING_FORMAT} ({{format, device, dtype, seed, batches}})")
    out: dict[int, dict[str, tuple[int, ...]]] = {}
    for b, entries in doc["batches"].items():
        if not str(b).isdigit() or not isinstance(entries, list):
            raise ModelError(f"{where}: batch {b!r} is not a batch size with a list of entries")
        out[int(b)] = {}
        for entry in entries:
            name, counts = _entry_counts(entry, f"{where}, batch {b}")
            if name in out[int(b)]:
                raise ModelError(f"{where}, batch {b}: {name} is recorded twice (an experts module called twice "
                                 f"in one forward has no one routing)")
            out[int(b)][name] = counts
    return out, f"{doc.get('device', '?')} {doc.get('dtype', '?')}, seed {doc.get('seed', '?')}"


def measured_routing(layers, plan: RoutingPlan, batch: int, path) -> str:
    """After mapping, in place: each ``GroupedMatMul`` layer whose node's module (``plan.paths``) has
    counts recorded for ``batch`` (``plan.recorded``) gets its config under ``measured`` routing with them.
    Returns the routing note (which routing the experts' configs are timed under and why; "" without
    grouped GEMMs). Raises ModelError naming ``path`` and the layer when its counts do not fit its config
    (other experts or rows)."""
    from benanza.errors import ModelError
    from benanza.kinds.grouped_gemm import GroupedGemmConfig

    grouped = [ly for ly in layers if isinstance(ly.config, GroupedGemmConfig) and ly.op_type == "GroupedMatMul"]
    if not grouped:
        return ""
    if plan.recorded is None:
        return ("balanced: no routing recorded (an ONNX file not exported by `benanza torch`): S = tokens x top-k "
                "rows spread evenly over min(E, S) experts")
    by_module = plan.recorded.get(batch, {})
    if not by_module:
        done = sorted(plan.recorded)
        return (f"balanced: the routing was recorded at batch{'es' if len(done) > 1 else ''} "
                f"{', '.join(map(str, done))}, not at batch {batch}")
    n, hit = 0, []
    for ly in grouped:
        module = plan.paths.get(ly.name, "")
        counts, cfg = by_module.get(module), ly.config
        if counts is None:
            continue
        if len(counts) != cfg.experts or sum(counts) != cfg.rows:
            raise ModelError(f"{path}: layer {ly.name} ({module}): the recorded routing gives {sum(counts)} rows over "
                             f"{len(counts)} experts; the layer has {cfg.rows} rows over {cfg.experts} experts")
        ly.config = dataclasses.replace(cfg, routing="measured", rows_per_expert=counts)
        n += 1
        hit += [module] if module not in hit else []
    active = ", ".join(f"{sum(1 for c in by_module[m] if c)}/{len(by_module[m])}" for m in hit)
    return (f"measured: the router's per-expert counts on the run's own inputs (batch {batch}, recorded by "
            f"`benanza torch` in a forward on {plan.how}) for {n} of {len(grouped)} grouped GEMMs in "
            f"{len(hit)} MoE layers; experts given rows per layer {active or '-'}"
            + ("" if n == len(grouped) else f"; the other {len(grouped) - n} stay balanced (no counts for their module)"))


def balanced_twins(layers) -> list:
    """The balanced twin (:meth:`benanza.kinds.GroupedGemmConfig.balanced`) of each layer's grouped GEMM
    timed under a measured routing, in the layers' order: the configs of the balanced what-if."""
    from benanza.kinds.grouped_gemm import GroupedGemmConfig

    return [ly.config.balanced() for ly in layers
            if isinstance(ly.config, GroupedGemmConfig) and ly.config.routing == "measured"]
