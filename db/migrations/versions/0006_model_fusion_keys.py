"""Schema 6: model records written before they named their fusion candidates (before 2026-11-24)
get the fusion configs that can be traced to them, so that `db export --model NAME` takes the fused
measurements too (data only, no table changes).

A model record (``models``, ``model_configs``) lacks its fusion keys when its summary counts fusion
candidates and it holds no more configs than its unique benchmarked layers. A fused config built
around one layer config of the model is the model's: ConvBiasAct and ConvBnAct around a convolution
(``params.conv``), GemmAct around a GEMM (``params.gemm``); the inner config's key is its kind and
canonical parameters hashed as every layer key is (``benanza.kinds.base.LayerConfig.key``:
``<kind>-<16 hex of sha256({"kind", "params"} as sorted, compact JSON)>``), and the fused config gets
the inner config's layer count. Fused configs of several layers of other kinds (attention, a
decomposed LayerNorm, GELU) cannot be traced this way: such a record keeps its note in `db export`.

Revision ID: 0006
Revises: 0005
"""
import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: fused kind -> (the field holding the inner config, the inner config's kind)
AROUND = {"ConvBiasAct": ("conv", "Conv"), "ConvBnAct": ("conv", "Conv"), "GemmAct": ("gemm", "Gemm")}


def inner_key(kind: str, params: dict) -> str | None:
    """The key of the layer config a fused config of ``kind`` is built around, or None."""
    field, inner = AROUND.get(kind, (None, None))
    if field is None or not isinstance(params.get(field), dict):
        return None
    blob = json.dumps({"kind": inner, "params": params[field]}, sort_keys=True, separators=(",", ":"))
    return f"{inner.lower()}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def upgrade() -> None:
    conn = op.get_bind()
    around: dict[str, list[str]] = {}
    for key, kind, params in conn.execute(sa.text(
            "SELECT key, kind, params FROM layer_configs WHERE kind IN ('ConvBiasAct', 'ConvBnAct', 'GemmAct')")):
        try:
            k = inner_key(kind, json.loads(params or "{}"))
        except ValueError:
            continue
        if k is not None:
            around.setdefault(k, []).append(key)
    for model_id, summary in conn.execute(sa.text("SELECT id, summary FROM models")).fetchall():
        try:
            s = json.loads(summary or "{}")
        except ValueError:
            continue
        counts = dict(conn.execute(sa.text("SELECT layer_key, count FROM model_configs WHERE model_id = :m"),
                                   {"m": model_id}).fetchall())
        if not s.get("fusion_candidates") or len(counts) > s.get("unique_benchmarked", len(counts)):
            continue  # no candidates, or the record names them already
        for k, n in list(counts.items()):
            for fused in around.get(k, ()):
                if fused not in counts:
                    conn.execute(sa.text("INSERT INTO model_configs (model_id, layer_key, count) VALUES (:m, :k, :n)"),
                                 {"m": model_id, "k": fused, "n": n})
                    counts[fused] = n
        s["fusion_keys"] = "traced"  # by this migration: `db export --model NAME` says what it cannot take
        conn.execute(sa.text("UPDATE models SET summary = :s WHERE id = :m"),
                     {"s": json.dumps(s, sort_keys=True), "m": model_id})
    op.execute(sa.text("UPDATE schema_info SET value = '6' WHERE key = 'schema_version'"))


def downgrade() -> None:
    op.execute(sa.text("UPDATE schema_info SET value = '5' WHERE key = 'schema_version'"))
