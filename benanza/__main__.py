"""``python -m benanza`` runs the command line. A Ctrl-C while its modules load (a second or more:
typer, rich, SQLAlchemy, numpy) is the one line ``benanza: interrupted`` and exit 130, as later
(:func:`benanza.cli.app.main` installs its own handler), not Python's traceback."""
import os
import signal


def _interrupted_while_loading(signum, frame):
    os.write(2, b"benanza: interrupted\n")
    os._exit(130)


signal.signal(signal.SIGINT, _interrupted_while_loading)

from benanza.cli import main  # noqa: E402 (after the handler: the imports are what it covers)

main()
