"""Aligned tables and `key  value` lines, painted after alignment when the `Style` says so.

Every cell and value (not the headers and keys: they are ours) is passed
through `printable` before it is measured or painted, so a string from the
daemon cannot add a row, move the cursor or recolour the terminal, whichever
renderer put it there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reynctl.render.formats import printable

__all__ = ["Cell", "Style", "Text", "table"]


_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


@dataclass(frozen=True, slots=True)
class Style:
    """Whether to colour, and how. `Style(False)` leaves text untouched."""

    color: bool = False

    def __call__(self, text: str, *styles: str) -> str:
        """`text` in the given styles (names of _CODES), or unchanged without colour."""
        if not self.color or not styles or not text:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


@dataclass(frozen=True, slots=True)
class Cell:
    """A table cell with the styles it is painted in."""

    text: str
    styles: tuple[str, ...] = ()


# A value of a `key  value` line: plain text, one painted cell, or pieces of both.
Text = str | Cell | tuple[str | Cell, ...]


def _cell(value: Cell | str) -> Cell:
    """`value` as a Cell whose text is safe to print."""
    if isinstance(value, Cell):
        return Cell(printable(value.text), value.styles)
    return Cell(printable(value))


def _paint(value: Text, style: Style) -> str:
    """A `key  value` line's value: escaped, then painted piece by piece."""
    pieces = value if isinstance(value, tuple) else (value,)
    return "".join(style(c.text, *c.styles) for c in map(_cell, pieces))


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Cell | str]],
    style: Style,
    align: str = "",
) -> str:
    """Rows under headers, columns padded to their widest cell.

    `align` holds one letter per column, `l` or `r` (default `l`). A last
    column aligned left is not padded, so lines carry no trailing spaces.
    """
    cells = [[_cell(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c.text))
    last = len(headers) - 1

    def line(row: Sequence[Cell]) -> str:
        parts = []
        for i, c in enumerate(row):
            right = i < len(align) and align[i] == "r"
            pad = " " * (widths[i] - len(c.text)) if i < last or right else ""
            parts.append(
                pad + style(c.text, *c.styles) if right else style(c.text, *c.styles) + pad
            )
        return "  ".join(parts).rstrip()

    head = line([Cell(h, ("bold",)) for h in headers])
    return "\n".join([head, *(line(r) for r in cells)])


def _pairs(rows: Sequence[tuple[str, Text]], style: Style) -> str:
    """`key  value` lines, keys padded to the longest; values as `_paint` shows them."""
    width = max(len(k) for k, _ in rows)
    return "\n".join(
        f"{style(k.ljust(width), 'bold')}  {_paint(v, style)}".rstrip() for k, v in rows
    )


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())
