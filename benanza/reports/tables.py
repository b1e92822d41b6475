"""Terminal tables that follow the terminal's width, and the consoles that print them.

A :class:`FitTable` is a rich renderable: at print time it gets the console's width and, when its
rows do not fit,

1. drops the least important columns (highest :attr:`Col.drop` first), then adds back the small
   dropped columns that fit again;
2. narrows the name and text columns, widest first: a name keeps its distinguishing end
   (``/layer1/…/conv2/Conv``, :func:`middle_ellipsis`), text wraps at word boundaries;
3. never narrows a number column below its widest cell: numbers are never cut or wrapped (a table
   that cannot fit even then is printed at its least width; the terminal wraps the lines).

Piped output (stdout not a terminal) gets a console of :data:`PIPE_WIDTH` columns: every table at
its natural width, nothing dropped or cut, no colour (:func:`console`).

Every console of :func:`console` is a :class:`SafeConsole`: no text it writes can drive the terminal
(model and database strings are untrusted; :func:`benanza.reports.safe_text.terminal_text`), rich
markup and emoji codes are off unless a call asks for them, and table cells, titles and captions are
neutralised before they are measured, so a hostile name keeps its column.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Union

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from benanza.reports.safe_text import TERMINAL_UNSAFE, terminal_text

#: the width of a console that writes to a pipe or a file: wide enough that no table is narrowed
PIPE_WIDTH = 100_000

#: least width of a name column before columns are dropped, and of a text column
NAME_MIN = 16
TEXT_MIN = 12
#: the last resort in a very narrow terminal, before the table is printed wider than it
SQUEEZE_MIN = 6
#: a text (prose) column wraps beyond this width when the table does not fit at its natural width
TEXT_CAP = 40

#: rich's default box with edges and one space of padding each side: 3 columns per column + 1
_PER_COLUMN = 3

Cell = Union[str, Text, None]


class SafeConsole(Console):
    """A rich console whose written text never carries a control character of its input: each
    segment it renders passes :func:`~benanza.reports.safe_text.terminal_text` (the escapes rich
    writes itself, colours and cursor moves, are styles and control segments, not text, and stay)."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None):
        """Rich's :meth:`rich.console.Console.render`, each text segment neutralised."""
        for seg in super().render(renderable, options):
            if seg.control or not TERMINAL_UNSAFE.search(seg.text):
                yield seg
            else:
                yield Segment(terminal_text(seg.text), seg.style)


def console(stderr: bool = False, **kw) -> Console:
    """A rich console for stdout (or stderr): the terminal's width when it is a terminal (rich reads
    ``COLUMNS`` too), else :data:`PIPE_WIDTH` columns and no colour (plain and complete). A
    :class:`SafeConsole` with markup and emoji codes off by default (a ``[link=...]`` or ``:fire:``
    in a file or layer name is printed as written)."""
    kw = {"markup": False, "emoji": False, **kw}
    c = SafeConsole(stderr=stderr, **kw)
    if not c.is_terminal:
        c = SafeConsole(stderr=stderr, width=PIPE_WIDTH, no_color=True, **kw)
    return c


def safe_cell(cell: Cell) -> Text:
    """A table cell as :class:`rich.text.Text` with the control characters of its text made visible
    (:func:`~benanza.reports.safe_text.terminal_text`), measured as printed; a styled ``Text`` keeps
    its style (and its spans when its text is clean)."""
    if isinstance(cell, Text):
        if not TERMINAL_UNSAFE.search(cell.plain):
            return cell
        return Text(terminal_text(cell.plain), style=cell.style)
    return Text("" if cell is None else terminal_text(cell))


def fmt_ms(ms: float | None) -> str:
    """A time given in ms with its unit and three significant digits: ``1.23 ms``, ``43.2 µs``,
    ``0.043 µs``; ``-`` for None or NaN."""
    if ms is None or not isinstance(ms, (int, float)) or not math.isfinite(ms):
        return "-"
    a = abs(ms)
    if a >= 1:
        return f"{ms:.{2 if a < 10 else 1 if a < 100 else 0}f} ms"
    us = ms * 1e3
    b = abs(us)
    return f"{us:.{3 if b < 1 else 2 if b < 10 else 1 if b < 100 else 0}f} µs"


def middle_ellipsis(s: str, width: int) -> str:
    """``s`` in at most ``width`` cells, cut in the middle so that its distinguishing end stays:
    whole trailing path segments (``/``) when there are, with the head cut at a segment boundary
    (``/layer1/layer1.0/conv2/Conv`` in 20: ``/layer1/…/conv2/Conv``); else about a third head, two
    thirds tail (``resnet50_layer4_bottleneck_conv3`` in 16: ``resne…ck_conv3``)."""
    if len(s) <= width:
        return s
    if width <= 1:
        return "…"[:width]
    room = width - 1
    cuts = [i for i, ch in enumerate(s) if ch == "/" and i > 0]
    tail = ""
    for i in reversed(cuts):  # the longest whole-segment tail that leaves room for a head
        if len(s) - i <= room - min(4, room // 3):
            tail = s[i:]
        else:
            break
    if tail:
        head = s[:room - len(tail)]
        if "/" in head[1:]:
            head = head[:head.rindex("/") + 1]
        return head + "…" + tail
    h = room // 3
    return s[:h] + "…" + s[len(s) - (room - h):]


def token_wrap(s: str, width: int) -> str:
    """``s`` in lines of at most ``width`` cells, broken after a ``_``, ``,`` or space (kept at the
    end of the line), a token longer than ``width`` cut into pieces: ``eng41_k2=1_k13=0_k18=0`` in 12
    is ``eng41_k2=1_`` / ``k13=0_k18=0``."""
    tokens = re.findall(r"[^_, ]*[_, ]|[^_, ]+$", s) or [s]
    lines, cur = [], ""
    for t in tokens:
        while cell_len(t) > width:  # one token wider than the column
            if cur:
                lines.append(cur)
                cur = ""
            lines.append(t[:width])
            t = t[width:]
        if cell_len(cur) + cell_len(t) > width and cur:
            lines.append(cur)
            cur = ""
        cur += t
    if cur:
        lines.append(cur)
    return "\n".join(line.rstrip(" ") for line in lines)


@dataclass(frozen=True)
class Col:
    """A column of a :class:`FitTable`.

    ``kind``: ``num`` (right-aligned, never cut or wrapped), ``name`` (one line, middle-ellipsised
    when narrowed), ``text`` (wraps at words when narrowed) or ``token`` (an identifier such as a
    cuDNN engine config, ``eng41_k2=1_k13=0``: wraps after ``_``, ``,`` or a space, never inside a
    token unless one token is wider than the column). ``drop``: 0 for a column always shown, else
    the order in which columns go when the table does not fit (highest first); a droppable column
    whose every cell is empty goes before any other."""

    header: str
    kind: str = "text"
    drop: int = 0
    justify: str | None = None


class FitTable:
    """A table that fits the console it is printed on (module doc). ``cols``: :class:`Col` or a
    header string (a text column always shown); cells: strings (printed as they are, never read
    as rich markup), :class:`rich.text.Text` (styled) or None (empty)."""

    def __init__(self, title: str | Text | None, cols: Iterable[Col | str], caption: str | None = None):
        self.title = title
        self.caption = caption
        self.cols = [c if isinstance(c, Col) else Col(c) for c in cols]
        self.rows: list[list[Text]] = []
        #: draw one-line rows without rich's per-cell layout (:meth:`_fast_render`; the same lines)
        self.fast = True

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.cols):
            raise ValueError(f"{len(cells)} cells for {len(self.cols)} columns")
        self.rows.append([safe_cell(c) for c in cells])

    # ------------------------------------------------------------------------------------ layout

    def _natural(self, i: int) -> int:
        col = self.cols[i]
        cells = max((cell_len(line) for r in self.rows for line in r[i].plain.split("\n")), default=0)
        head = len(col.header) if col.kind == "name" else max(map(len, col.header.split() or [""]))
        return max(cells, head, 1)

    def _least(self, i: int, natural: int) -> int:
        col = self.cols[i]
        if col.kind == "num":
            return natural
        floor = NAME_MIN if col.kind == "name" else TEXT_MIN
        return min(natural, max(floor, len(col.header) if col.kind == "name" else 0))

    def layout(self, width: int) -> dict[int, int]:
        """The columns shown at console ``width`` and their content widths: {index: width}."""
        natural = {i: self._natural(i) for i in range(len(self.cols))}

        def total(ws: dict[int, int]) -> int:
            return sum(ws.values()) + _PER_COLUMN * len(ws) + 1

        if total(natural) <= width:
            return natural
        capped = {i: min(w, TEXT_CAP) if self.cols[i].kind in ("text", "token") else w for i, w in natural.items()}
        shown = dict(capped)
        empty = {i for i, c in enumerate(self.cols) if c.drop and all(not r[i].plain for r in self.rows)}
        order = sorted((i for i, c in enumerate(self.cols) if c.drop),
                       key=lambda i: (i not in empty, -self.cols[i].drop, -i))
        dropped = []
        for i in order:
            if total(shown) <= width:
                break
            del shown[i]
            dropped.append(i)
        if total(shown) <= width:  # room left: the small dropped columns, most important first
            for i in sorted(dropped, key=lambda i: self.cols[i].drop):
                if i not in empty and total(shown) + capped[i] + _PER_COLUMN <= width:
                    shown[i] = capped[i]
            return dict(sorted(shown.items()))
        excess = total(shown) - width
        for floor in (None, SQUEEZE_MIN):  # comfortable widths first; in a very narrow terminal, less
            least = {i: self._least(i, w) if floor is None else min(w, floor) if self.cols[i].kind != "num" else w
                     for i, w in shown.items()}
            while excess > 0:
                room = [i for i in shown if shown[i] > least[i]]
                if not room:
                    break  # printed at its least width: numbers stay whole
                widest = max(room, key=lambda i: (shown[i], i))
                shown[widest] -= 1
                excess -= 1
        return shown

    def table(self, width: int, rows: bool = True, caption: bool = True) -> Table:
        """The rich table of this table's rows (none with ``rows=False``) at console ``width``."""
        shown = self.layout(width)
        t = Table(title=safe_cell(self.title) if self.title is not None else None,
                  caption=safe_cell(self.caption) if self.caption and caption else None)
        self._columns(t, shown)
        for r in self.rows if rows else ():
            t.add_row(*self._cells(r, shown))
        return t

    def _cells(self, r: list[Text], shown: dict[int, int]) -> list[Text]:
        cells = []
        for i, w in shown.items():
            cell = r[i]
            if self.cols[i].kind == "name" and cell.cell_len > w:
                cell = Text(middle_ellipsis(cell.plain, w), style=cell.style)
            elif self.cols[i].kind == "token" and cell.cell_len > w and not cell.spans:
                cell = Text(token_wrap(cell.plain, w), style=cell.style)
            cells.append(cell)
        return cells

    def _columns(self, t: Table, shown: dict[int, int]) -> None:
        """Add the shown columns to the rich table ``t`` (header, justify, width, wrapping)."""
        for i, w in shown.items():
            c = self.cols[i]
            natural = self._natural(i)
            justify = c.justify or ("right" if c.kind == "num" else "left")
            # a column whose every cell fits needs no wrapping (and rich then skips its line breaking)
            t.add_column(safe_cell(c.header), justify=justify, width=w,
                         no_wrap=c.kind == "name" or (natural <= w and cell_len(c.header) <= w),
                         overflow="ellipsis" if c.kind == "name" else "fold")

    def _fast_render(self, console: Console, options: ConsoleOptions, shown: dict[int, int]) -> RenderResult:
        """The lines rich's Table draws (``tests/test_cli_tables.py`` checks them equal, colours
        included), without rich's per-cell layout where a row is one line of single-style cells:
        rich draws the title, the header and the bottom edge (the table without rows), and each row
        that wraps or mixes styles (a one-row table of the same columns, its edges cut); this method
        the other rows, with the box's own characters. Rich takes ~0.6 ms a row; a 600-layer
        analysis is printed in about 0.1 s this way."""
        from rich import box as rich_box
        from rich.segment import Segment

        widths = list(shown.values())
        rows = [self._cells(r, shown) for r in self.rows]
        # a row this method draws: cells of one style whose every line fits (a token column's cell comes
        # wrapped already, :func:`token_wrap`); rich draws the others (text that wraps at words)
        wraps = [any(c.spans or any(cell_len(x) > w for x in c.plain.split("\n")) for c, w in zip(cells, widths))
                 for cells in rows]
        if sum(wraps) * 10 > len(rows):  # mostly wrapping rows: rich's one table is faster than rows apart
            yield from console.render(self.table(options.max_width), options)
            return
        head = list(Segment.split_lines(console.render(self.table(options.max_width, rows=False, caption=False),
                                                       options)))
        for line in head[:-1]:  # title, top edge, header rows, header separator
            yield from line
            yield Segment.line()
        b = rich_box.HEAVY_HEAD.substitute(options, safe=console.safe_box)
        just = [self.cols[i].justify or ("right" if self.cols[i].kind == "num" else "left") for i in shown]
        space = Segment(" ")
        for n, (cells, wrap) in enumerate(zip(rows, wraps)):
            if wrap:
                one = Table(box=rich_box.SQUARE, show_header=False)
                self._columns(one, shown)
                one.add_row(*cells)
                for line in list(Segment.split_lines(console.render(one, options)))[1:-1]:
                    yield from line
                    yield Segment.line()
                continue
            last = n == len(self.rows) - 1
            left, mid, right = (b.foot_left, b.foot_vertical, b.foot_right) if last else \
                (b.mid_left, b.mid_vertical, b.mid_right)
            lines = [c.plain.split("\n") for c in cells]
            for n_line in range(max(len(x) for x in lines)):  # top-aligned, as rich aligns a body row
                yield Segment(left)
                for k, (c, cl, w, j) in enumerate(zip(cells, lines, widths, just)):
                    text = cl[n_line] if n_line < len(cl) else ""
                    pad = " " * (w - cell_len(text))
                    yield space
                    styled = c.style and n_line < len(cl)  # a cell's blank lines below its text: unstyled
                    yield Segment(pad + text if j == "right" else text + pad,
                                  console.get_style(c.style) if styled else None)
                    yield space
                    yield Segment(mid if k < len(cells) - 1 else right)
                yield Segment.line()
        yield from head[-1]  # the bottom edge
        yield Segment.line()
        if self.caption:
            yield from console.render(safe_cell(self.caption), options.update(width=self.width(options.max_width),
                                                                         justify="center", highlight=False))

    def width(self, width: int) -> int:
        """The printed width of the table at console ``width`` (at most ``width`` when it fits)."""
        shown = self.layout(width)
        return sum(shown.values()) + _PER_COLUMN * len(shown) + 1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        w = options.max_width
        need = self.width(w)
        opts = options.update_width(max(w, need))
        from rich import box as rich_box

        # the fast path where the table fits and the box is drawn as is (not an ASCII substitute)
        if self.rows and opts.max_width == w and rich_box.HEAVY_HEAD.substitute(opts, safe=console.safe_box) \
                is rich_box.HEAVY_HEAD and self.fast:
            yield from self._fast_render(console, opts, self.layout(w))
        else:
            yield from console.render(self.table(w), opts)
