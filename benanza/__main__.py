"""``python -m benanza`` and the installed ``benanza`` script (``[project.scripts]``) run the command
line through :func:`run`. A Ctrl-C while its modules load (typer and rich at start; a command's own,
SQLAlchemy, numpy, onnx, when it runs) is the one line ``benanza: interrupted`` and exit 130, as later (:func:`benanza.cli.app.main`
installs its own handler), not Python's traceback. Importing this module installs nothing."""
import os
import signal


def _interrupted_while_loading(signum, frame):
    os.write(2, b"benanza: interrupted\n")
    os._exit(130)


def run() -> None:
    """The command line, with the Ctrl-C handler installed before the command modules load."""
    signal.signal(signal.SIGINT, _interrupted_while_loading)
    from benanza.cli import main  # after the handler: the imports are what it covers

    main()


if __name__ == "__main__":
    run()
