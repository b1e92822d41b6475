"""The ``benanza`` command line (typer + rich): one module per command group, each command a short
function that parses its options into a request (:mod:`benanza.spec`), calls the use case
(:mod:`benanza.usecases`) and hands the result to :mod:`benanza.reports`.

- :mod:`~benanza.cli.app`: the apps, one-line failures, the entry point :func:`main`;
- :mod:`~benanza.cli.options`: the options, declared once (shared option sets);
- :mod:`~benanza.cli.suite`: ``layers``, ``generate``, ``build``, ``run``, ``bench``, ``worker``, ``ceilings``, ``system``;
- :mod:`~benanza.cli.analysis`: ``analyze``, ``roofline``, ``predict``, ``report``;
- :mod:`~benanza.cli.framework`: ``profile``, ``torch``;
- :mod:`~benanza.cli.db`: ``db systems``, ``query``, ``shared``, ``compare``, ``export``, ``import``, ``upgrade``.
"""
from benanza.cli import analysis, db, framework, suite
from benanza.cli.app import app, db_app, main  # noqa: F401 (the console entry: benanza.cli:main)

#: the commands, in ``benanza --help``'s order
COMMANDS = (suite.layers, suite.generate, suite.build, suite.run, analysis.analyze, analysis.report,
            analysis.predict, analysis.roofline, suite.bench, suite.worker, suite.ceilings, suite.system,
            framework.profile)
for _command in COMMANDS:
    app.command()(_command)
app.command("torch")(framework.torch_cmd)
for _name, _command in (("systems", db.db_systems), ("query", db.db_query), ("shared", db.db_shared),
                        ("compare", db.db_compare), ("export", db.db_export), ("import", db.db_import),
                        ("upgrade", db.db_upgrade)):
    db_app.command(_name)(_command)
