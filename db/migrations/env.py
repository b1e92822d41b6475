"""Alembic environment of the benanza performance database.

benanza runs the migrations itself (benanza.database.store.open_db, `benanza db upgrade`), passing its
connection in ``config.attributes["connection"]``; `alembic -x url=...` works too."""
from alembic import context
from sqlalchemy import create_engine

from benanza.database.store import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    conn = config.attributes.get("connection")
    if conn is not None:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    engine = create_engine(url)
    with engine.begin() as c:
        context.configure(connection=c, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


run()
