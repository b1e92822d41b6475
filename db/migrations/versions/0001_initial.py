"""Schema 1: systems, layer configs, runs, jobs, measurements, choices, models.

The schema benanza 0.1 wrote (databases with schema_info.schema_version = 1 and no alembic_version
table are stamped with this revision when first opened).

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("schema_info", sa.Column("key", sa.String(64), primary_key=True),
                    sa.Column("value", sa.String(256), nullable=False))
    op.create_table(
        "systems",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
        sa.Column("gpu_name", sa.String(128), nullable=False),
        sa.Column("compute_capability", sa.String(16), nullable=False),
        sa.Column("sm_count", sa.Integer, nullable=False),
        sa.Column("memory_bytes", sa.BigInteger, nullable=False),
        sa.Column("l2_cache_bytes", sa.BigInteger, nullable=False),
        sa.Column("memory_bus_width_bits", sa.Integer, nullable=False),
        sa.Column("max_sm_clock_mhz", sa.Integer, nullable=False),
        sa.Column("max_mem_clock_mhz", sa.Integer, nullable=False),
        sa.Column("driver_version", sa.String(64), nullable=False),
        sa.Column("driver_cuda_version", sa.Integer, nullable=False),
        sa.Column("runtime_version", sa.Integer, nullable=False),
        sa.Column("cudnn_version", sa.Integer, nullable=False),
        sa.Column("cublas_version", sa.Integer, nullable=False),
        sa.Column("info", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "layer_configs",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False, index=True),
        sa.Column("params", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("batch", sa.Integer, nullable=False),
        sa.Column("flops", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("system_id", sa.Integer, sa.ForeignKey("systems.id")),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("suite", sa.Text, nullable=False),
        sa.Column("models", sa.Text, nullable=False),
        sa.Column("jobs_planned", sa.Integer, nullable=False),
        sa.Column("jobs_done", sa.Integer, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("system_id", sa.Integer, sa.ForeignKey("systems.id"), nullable=False, index=True),
        sa.Column("job", sa.String(96), nullable=False),
        sa.Column("layer_key", sa.String(64), sa.ForeignKey("layer_configs.key"), nullable=False, index=True),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
        sa.Column("wall_s", sa.Double),
        sa.Column("finished_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("system_id", "job"),
    )
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("system_id", sa.Integer, sa.ForeignKey("systems.id"), nullable=False),
        sa.Column("layer_key", sa.String(64), sa.ForeignKey("layer_configs.key"), nullable=False),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("call", sa.String(96), nullable=False),
        sa.Column("algorithm", sa.String(96), nullable=False),
        sa.Column("math", sa.String(32), nullable=False),
        sa.Column("dtype", sa.String(16), nullable=False),
        sa.Column("cache", sa.String(8), nullable=False),
        sa.Column("layout", sa.String(8), nullable=False),
        sa.Column("batch", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        *[sa.Column(c, sa.Double) for c in ("median_ms", "q1_ms", "q3_ms", "mean_ms", "min_ms", "max_ms",
                                            "stddev_ms", "rse")],
        sa.Column("samples", sa.Integer),
        sa.Column("converged", sa.Boolean),
        sa.Column("method", sa.String(32), nullable=False),
        sa.Column("reps", sa.Integer),
        sa.Column("host_us", sa.Double),
        sa.Column("workspace_bytes", sa.BigInteger, nullable=False),
        sa.Column("sm_clock_min_mhz", sa.Integer),
        sa.Column("sm_clock_max_mhz", sa.Integer),
        sa.Column("dropped", sa.Integer),
        sa.Column("power_capped", sa.Integer),
        sa.Column("clock_reasons", sa.BigInteger),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("system_id", "layer_key", "precision", "call", "algorithm", "math", "dtype", "cache",
                            "layout", name="uq_measurement"),
        sa.Index("ix_measurement_lookup", "system_id", "layer_key", "status"),
    )
    op.create_table(
        "choices",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("system_id", sa.Integer, sa.ForeignKey("systems.id"), nullable=False),
        sa.Column("layer_key", sa.String(64), sa.ForeignKey("layer_configs.key"), nullable=False),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("source", sa.String(96), nullable=False),
        sa.Column("rank", sa.Integer, nullable=False),
        sa.Column("algorithm", sa.String(96), nullable=False),
        sa.Column("math", sa.String(32), nullable=False),
        sa.Column("status", sa.String(64), nullable=False),
        sa.Column("workspace_bytes", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
        sa.UniqueConstraint("system_id", "layer_key", "precision", "source", "rank"),
    )
    op.create_table(
        "models",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("batch", sa.Integer, nullable=False),
        sa.Column("layers", sa.Integer, nullable=False),
        sa.Column("unique_layers", sa.Integer, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.UniqueConstraint("sha256", "batch"),
    )
    op.create_table(
        "model_configs",
        sa.Column("model_id", sa.Integer, sa.ForeignKey("models.id"), primary_key=True),
        sa.Column("layer_key", sa.String(64), sa.ForeignKey("layer_configs.key"), primary_key=True),
        sa.Column("count", sa.Integer, nullable=False),
    )
    op.bulk_insert(sa.table("schema_info", sa.column("key"), sa.column("value")),
                   [{"key": "schema_version", "value": "1"}])


def downgrade() -> None:
    for t in ("model_configs", "models", "choices", "measurements", "jobs", "runs", "layer_configs", "systems",
              "schema_info"):
        op.drop_table(t)
