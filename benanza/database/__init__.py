"""Database: the performance database (SQLAlchemy, Alembic), its queries, sharing and export formats."""
