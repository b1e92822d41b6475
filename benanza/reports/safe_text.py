"""Untrusted text made safe for where the printer puts it: the terminal, SVG/XML and HTML, CSV.

Strings from a model file (node, tensor, graph and model names, doc strings, file names) and from a
database (system and GPU names, driver strings, layer keys, algorithm names, notes) are data: they
must never drive the terminal (ANSI colours, OSC window titles, OSC 52 clipboard writes, bidi
overrides), break an XML document (XML 1.0 forbids most C0 characters even as character
references), or become a spreadsheet formula. One function per destination:

* :func:`terminal_text`: C0 and C1 control characters (except a newline and a tab), DEL, lone
  surrogates, line/paragraph separators and the bidi controls become visible escapes (``\\x1b``,
  ``\\u202e``); every other character (accents, CJK, emoji) stays. The consoles of
  :mod:`benanza.reports.tables` apply it to every segment they write (:class:`SafeConsole`).
* :func:`xml_text`: the characters XML 1.0 forbids (and C1, DEL, noncharacters U+FFFE/U+FFFF)
  become U+FFFD; for SVG titles and the HTML report (whose escaping of ``<&"'`` is the XML
  writer's and Jinja's autoescape).
* :func:`mpl_text`: :func:`xml_text` with ``$`` escaped, so a name is never read as matplotlib
  mathtext (an odd ``$`` pair raised ValueError while drawing).
* :func:`csv_cell`: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
  return gets a leading ``'`` (OWASP, "CSV injection"), unless it reads as a number.

The C++ destination is :func:`benanza.kinds.cpp.cpp_string` (an escaped literal of the UTF-8 bytes).
"""
from __future__ import annotations

import re

#: the bidi embedding, override and isolate controls and the implicit marks (Unicode UAX #9; the
#: "Trojan Source" characters, CVE-2021-42574)
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

#: what the terminal must not receive raw: C0 (but ``\t`` and ``\n``), DEL, C1, surrogates (they
#: cannot be encoded), the line and paragraph separators, the bidi controls
TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029" + BIDI_CONTROLS + "]")

#: characters outside XML 1.0's Char production (plus C1 and DEL, "discouraged" there and parse
#: errors in HTML): W3C XML 1.0, section 2.2
XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")

#: the first characters that make a spreadsheet read a CSV cell as a formula
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _visible(m: re.Match) -> str:
    o = ord(m.group())
    return f"\\x{o:02x}" if o <= 0xFF else f"\\u{o:04x}"


def terminal_text(text) -> str:
    """``text`` (any object, as ``str``) with every character a terminal would act on written as a
    visible escape: ``"a\\x1b[31mb"`` -> ``"a\\\\x1b[31mb"``, U+202E -> ``"\\\\u202e"``. Newlines and tabs
    stay; all other characters (letters of any script, emoji) are unchanged. Idempotent. Raises
    nothing."""
    s = text if isinstance(text, str) else str(text)
    return TERMINAL_UNSAFE.sub(_visible, s) if TERMINAL_UNSAFE.search(s) else s


def xml_text(text) -> str:
    """``text`` (as ``str``) with the characters an XML 1.0 document cannot hold, even escaped,
    replaced by U+FFFD (and C1/DEL, which HTML treats as parse errors); markup characters are left
    to the document's writer to escape. Keeps ``\\t``, ``\\n``, ``\\r``. Raises nothing."""
    s = text if isinstance(text, str) else str(text)
    return XML_UNSAFE.sub("\ufffd", s) if XML_UNSAFE.search(s) else s


def mpl_text(text) -> str:
    """``text`` as a matplotlib label that ends up in an SVG: :func:`xml_text` with every ``$``
    escaped (``\\$``), so a name is drawn as it is, never parsed as mathtext."""
    return xml_text(text).replace("$", r"\$")


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def csv_cell(value):
    """A CSV cell's value: a string that a spreadsheet would run as a formula (it starts with one of
    :data:`FORMULA_START` and is not a number, ``-1.5`` stays) gets a leading ``'``; other values are
    returned as they are (the csv module quotes delimiters, quotes and line breaks)."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _is_number(value):
        return "'" + value
    return value
