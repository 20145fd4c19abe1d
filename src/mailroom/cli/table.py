"""Tables for people, drawn with the standard library: the read commands' one output widget.

rich drew these tables before; importing it cost a read command more than its
query (about 0.05 s of the 0.1 s of ``mailroom list`` on a fast machine, twice that
on a slow one). What a table here needs is small: a header, cells, each column as
wide as its widest cell, narrowed to fit the terminal (the widest columns first,
as rich does; a narrowed cell wraps at spaces and folds a word longer than its
column, so nothing is cut off), in the box rich drew, so the output reads as
before::

    ┏━━━━┳━━━━━━━━━┓
    ┃ id ┃ subject ┃
    ┡━━━━╇━━━━━━━━━┩
    │ 1  │ Hello   │
    └────┴─────────┘

Widths count terminal cells (an East Asian wide character takes two, a combining
mark none); control characters in a cell are shown as spaces.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import click

__all__ = [
    "Column",
    "cell_width",
    "operator_width",
    "print_table",
    "render",
    "terminal_width",
    "wrap",
]

DEFAULT_WIDTH = 80  # what a table fits when no terminal says otherwise, as rich did


@dataclass(frozen=True)
class Column:
    """A column: its header and, optionally, the most cells it may take (longer text wraps)."""

    header: str
    max_width: int | None = None


def _char_width(char: str) -> int:
    # unicodedata (a shared library) is loaded only for text that is not plain ASCII.
    import unicodedata

    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cell_width(text: str) -> int:
    """How many terminal cells ``text`` takes."""
    if text.isascii():
        return len(text)
    return sum(_char_width(char) for char in text)


def terminal_width() -> int:
    """The width to fit: ``COLUMNS``, else the terminal's (any standard stream), else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    for descriptor in (0, 1, 2):
        try:
            width = os.get_terminal_size(descriptor).columns
        except (OSError, ValueError):
            continue
        if width > 0:
            return width
    return DEFAULT_WIDTH


def _clean(text: str) -> str:
    """The cell's text on one line: control characters (newlines, tabs, escapes) as spaces."""
    if text.isprintable():
        return text
    import unicodedata

    return "".join(" " if unicodedata.category(char) == "Cc" else char for char in text)


def _fold(word: str, width: int) -> list[str]:
    """A word longer than ``width`` cut into pieces of at most ``width`` cells."""
    pieces, piece, used = [], "", 0
    for char in word:
        size = _char_width(char)
        if used + size > width and piece:
            pieces.append(piece)
            piece, used = "", 0
        piece += char
        used += size
    return [*pieces, piece]


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at spaces (a long word folded)."""
    if cell_width(text) <= width:
        return [text]
    lines: list[str] = []
    line, used = "", 0
    for word in text.split():
        size = cell_width(word)
        if line and used + 1 + size <= width:
            line, used = f"{line} {word}", used + 1 + size
            continue
        if line:
            lines.append(line)
        if size <= width:
            line, used = word, size
        else:
            *full, line = _fold(word, width)
            lines.extend(full)
            used = cell_width(line)
    return [*lines, line] if line or not lines else lines


def _narrowed(widths: list[int], room: int) -> list[int]:
    """Column widths that fit ``room`` cells: the widest columns shrink first, level by level.

    Each round shares what is still too much among the widest columns, none below the
    next widest, in rich's way (``ratio_reduce``), so the tables keep their layout.
    """
    widths = list(widths)
    while sum(widths) > room and max(widths) > 1:
        widest = max(widths)
        below = max((width for width in widths if width < widest), default=1)
        at_top = [index for index, width in enumerate(widths) if width == widest]
        remaining, left = sum(widths) - room, len(at_top)
        for index in at_top:
            cut = min(widest - below, round(remaining / left))
            widths[index] -= cut
            remaining, left = remaining - cut, left - 1
    return widths


def render(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """The table's lines, at most ``width`` cells wide (unless each column has one cell left)."""
    cells = [[_clean(str(cell)) for cell in row] for row in rows]
    natural = []
    for index, column in enumerate(columns):
        widest = max([cell_width(column.header), *(cell_width(row[index]) for row in cells)])
        natural.append(min(widest, column.max_width) if column.max_width else widest)
    # Each column has a space either side and a line after it, the table one more line.
    widths = _narrowed(natural, width - 3 * len(columns) - 1)

    def line(left: str, fill: str, cross: str, right: str) -> str:
        return left + cross.join(fill * (size + 2) for size in widths) + right

    def text_lines(values: Sequence[str], bar: str, bold: bool = False) -> list[str]:
        wrapped = [wrap(value, size) for value, size in zip(values, widths, strict=True)]
        drawn = []
        for number in range(max(len(lines) for lines in wrapped)):
            parts = []
            for lines, size in zip(wrapped, widths, strict=True):
                text = lines[number] if number < len(lines) else ""
                padding = " " * (size - cell_width(text))
                parts.append(f" {click.style(text, bold=True) if bold else text}{padding} ")
            drawn.append(bar + bar.join(parts) + bar)
        return drawn

    styled = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    drawn = [line("┏", "━", "┳", "┓")]
    drawn += text_lines([column.header for column in columns], "┃", bold=styled)
    drawn.append(line("┡", "━", "╇", "┩"))
    for row in cells:
        drawn += text_lines(row, "│")
    drawn.append(line("└", "─", "┴", "┘"))
    return drawn


def print_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None = None
) -> None:
    """Print the table fitted to ``width`` (default: :func:`terminal_width`)."""
    click.echo("\n".join(render(columns, rows, terminal_width() if width is None else width)))


def operator_width(limit: int) -> int:
    """The width of an operator's table: the terminal's up to ``limit``; ``limit`` in a pipe.

    Logs and scripts reading a pipe get whole lines rather than lines wrapped at 80.
    """
    return min(terminal_width(), limit) if sys.stdout.isatty() else limit
