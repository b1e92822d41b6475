"""Schema 7: a measurement's backend in its own column (``measurements.backend``: ``suite`` for the
generated C++ suite's cuDNN, cuBLAS and harness kernels, ``torch_eager`` for the framework's own
kernels as PyTorch eager runs them, ``torch_compile`` reserved), instead of the ``torch:`` prefix of
its call's name (benanza.kinds.backend.Backend). The call names stay as they were.

Backfill: a row whose call begins with ``torch:`` (case-sensitive, as the framework's worker wrote
it: ``torch:aten::conv2d``) is ``torch_eager``, every other row ``suite``, the rule of
``Backend.of_call`` for schema-6 names.

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: the column's type as the model declares it (benanza.database.store.BACKEND_TYPE): text, no enum type
BACKENDS = ("suite", "torch_eager", "torch_compile")


def upgrade() -> None:
    with op.batch_alter_table("measurements") as b:
        b.add_column(sa.Column("backend", sa.Enum(*BACKENDS, native_enum=False, create_constraint=False, length=16),
                               nullable=False, server_default="suite"))
    op.execute(sa.text("""UPDATE measurements SET backend = 'torch_eager' WHERE substr("call", 1, 6) = :prefix""")
               .bindparams(prefix="torch:"))
    op.execute(sa.text("UPDATE schema_info SET value = '7' WHERE key = 'schema_version'"))


def downgrade() -> None:
    with op.batch_alter_table("measurements") as b:
        b.drop_column("backend")
    op.execute(sa.text("UPDATE schema_info SET value = '6' WHERE key = 'schema_version'"))
