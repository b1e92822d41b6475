"""Schema 2: the build time of an engine plan (runtime compilation) in its own column, and an index
for the best-measurement lookups of the analyzer and `benanza db query`.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("measurements") as b:
        b.add_column(sa.Column("build_ms", sa.Double, nullable=True))
    op.create_index("ix_measurement_best", "measurements", ["system_id", "cache", "status", "layer_key", "median_ms"])
    op.execute(sa.text("UPDATE schema_info SET value = '2' WHERE key = 'schema_version'"))


def downgrade() -> None:
    op.drop_index("ix_measurement_best", table_name="measurements")
    with op.batch_alter_table("measurements") as b:
        b.drop_column("build_ms")
    op.execute(sa.text("UPDATE schema_info SET value = '1' WHERE key = 'schema_version'"))
