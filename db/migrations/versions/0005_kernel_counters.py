"""Schema 5: hardware counters of a measured implementation's kernels, read with Nsight Compute by
`benanza bench --counters` (DRAM throughput and bytes, SM throughput, achieved occupancy, duration,
kernel name and launch shape), one row per kernel.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kernel_counters",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("system_id", sa.Integer, sa.ForeignKey("systems.id"), nullable=False),
        sa.Column("layer_key", sa.String(64), sa.ForeignKey("layer_configs.key"), nullable=False),
        sa.Column("precision", sa.String(8), nullable=False),
        sa.Column("call", sa.String(96), nullable=False),
        sa.Column("algorithm", sa.String(96), nullable=False),
        sa.Column("math", sa.String(32), nullable=False),
        sa.Column("layout", sa.String(8), nullable=False),
        sa.Column("kernel_index", sa.Integer, nullable=False),
        sa.Column("kernel_name", sa.Text, nullable=False),
        sa.Column("block_size", sa.String(48), nullable=False, server_default=""),
        sa.Column("grid_size", sa.String(48), nullable=False, server_default=""),
        sa.Column("dram_pct", sa.Double, nullable=True),
        sa.Column("dram_bytes", sa.Double, nullable=True),
        sa.Column("sm_pct", sa.Double, nullable=True),
        sa.Column("occupancy_pct", sa.Double, nullable=True),
        sa.Column("duration_ns", sa.Double, nullable=True),
        sa.Column("tool", sa.String(96), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("system_id", "layer_key", "precision", "call", "algorithm", "math", "layout",
                            "kernel_index", name="uq_kernel_counter"),
    )
    op.execute(sa.text("UPDATE schema_info SET value = '5' WHERE key = 'schema_version'"))


def downgrade() -> None:
    op.drop_table("kernel_counters")
    op.execute(sa.text("UPDATE schema_info SET value = '4' WHERE key = 'schema_version'"))
