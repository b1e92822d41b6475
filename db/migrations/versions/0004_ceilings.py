"""Schema 4: machine ceilings measured per system (DRAM bandwidth, library GEMM rates, FP32 FMA
rate), the roofs of the roofline.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ceilings",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("system_id", sa.Integer, sa.ForeignKey("systems.id"), nullable=False),
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("unit", sa.String(16), nullable=False),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("work", sa.Double, nullable=False),
        sa.Column("median_ms", sa.Double, nullable=False),
        sa.Column("rse", sa.Double, nullable=True),
        sa.Column("samples", sa.Integer, nullable=True),
        sa.Column("converged", sa.Boolean, nullable=True),
        sa.Column("method", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("system_id", "name"),
    )
    op.execute(sa.text("UPDATE schema_info SET value = '4' WHERE key = 'schema_version'"))


def downgrade() -> None:
    op.drop_table("ceilings")
    op.execute(sa.text("UPDATE schema_info SET value = '3' WHERE key = 'schema_version'"))
