"""Schema 3: a measurement's implementation details as a JSON object (cuDNN engine global index,
knob choices, numerical and behaviour notes; cuBLASLt algo id, tile, stages, split-K).

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("measurements") as b:
        b.add_column(sa.Column("details", sa.Text, nullable=False, server_default=""))
    op.execute(sa.text("UPDATE schema_info SET value = '3' WHERE key = 'schema_version'"))


def downgrade() -> None:
    with op.batch_alter_table("measurements") as b:
        b.drop_column("details")
    op.execute(sa.text("UPDATE schema_info SET value = '2' WHERE key = 'schema_version'"))
