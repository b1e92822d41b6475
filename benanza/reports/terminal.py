"""The terminal and the JSON documents: the one place commands print.

``out`` (stdout) and ``err`` (stderr) are rich consoles at the terminal's width; pipes and files get
every table whole, without colour (:func:`benanza.reports.tables.console`). JSON documents go to
stdout through :func:`print_json` (plain ``json.dumps``, indent 2).

Every string printed here passes :func:`benanza.reports.safe_text.terminal_text` (the consoles
are :class:`benanza.reports.tables.SafeConsole`): a model's or a database's text never drives the
terminal. JSON needs nothing: ``json.dumps`` writes control characters as ``\\u`` escapes.

JSON shape convention: every command's ``--json`` output is one envelope,
``{"document", "schema", "system", "scenarios" | "records" | the result's keys}``, made by
:func:`benanza.reports.documents.envelope` (its module says which command has which).
"""
from __future__ import annotations

import json
import sys

from benanza.reports.safe_text import terminal_text
from benanza.reports.tables import console

# the terminal's width on a terminal; pipes and files get every table whole, without colour
out = console()
err = console(stderr=True)


def print_json(doc, default=None) -> None:
    """``--json`` output: the document as indented JSON on stdout. Plain ``json.dumps``, not
    rich's ``print_json``: rich highlights every token, 2.2 s for one resnet50 bench document on an
    H200 host, more than the rest of a repeat."""
    sys.stdout.write(json.dumps(doc, indent=2, default=default) + "\n")
    sys.stdout.flush()


def notices(lines, soft_wrap: bool = False) -> None:
    """Each line as ``notice: LINE`` on stderr."""
    for n in lines:
        err.print(f"notice: {terminal_text(n)}", markup=False, emoji=False, soft_wrap=soft_wrap)


def line(text: str, stderr: bool = False) -> None:
    """One plain line (no markup, no emoji codes, no highlighting) on stdout or stderr."""
    (err if stderr else out).print(terminal_text(text), markup=False, emoji=False, highlight=False)


def error_line(msg: str) -> None:
    """The one line of a failure, ``benanza: MSG`` on stderr: printed as written (no rich markup,
    emoji codes or highlighting: a ``:fire:`` or ``[bold]`` in a file name stays text), its control
    characters made visible (:func:`~benanza.reports.safe_text.terminal_text`)."""
    err.print(f"benanza: {terminal_text(msg)}", markup=False, emoji=False, highlight=False, soft_wrap=True)
