"""Cells and coordinates.

A cell is written as its column letter(s) and its row number, as in the seeds: ``E5``. Columns past
``Z`` continue as in a spreadsheet (``AA``, ``AB``, ...) so that expanded grids keep readable
labels. Internally a cell is a zero-based ``(row, col)`` pair; its *index* (``row * cols + col``)
orders the cells of a grid and is what commitments bind to.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from .errors import ErrorCode, Refused

__all__ = ["BLANKS", "Cell", "column_label", "parse_cell"]

# Letters then a row number without leading zeros (spec 8.1). fullmatch, not "$": "$" also
# matches before a trailing newline.
_CELL_RE = re.compile(r"([A-Z]{1,2})([1-9][0-9]{0,2})")

BLANKS = " \t"
"""The characters a label may have around it (spec 8.1): ASCII space and tab, nothing else."""


class Cell(NamedTuple):
    """A zero-based ``(row, col)`` position on a grid."""

    row: int
    col: int

    def label(self) -> str:
        """The seed notation of this cell, e.g. ``Cell(4, 4).label() == "E5"``."""
        return f"{column_label(self.col)}{self.row + 1}"

    def index(self, cols: int) -> int:  # type: ignore[override]
        """The cell's index on a grid of ``cols`` columns (row-major)."""
        return self.row * cols + self.col

    def on(self, rows: int, cols: int) -> bool:
        """Whether the cell lies on a ``rows`` x ``cols`` grid."""
        return 0 <= self.row < rows and 0 <= self.col < cols

    def neighbours(self, rows: int, cols: int) -> list[Cell]:
        """The up to eight cells round this one (sides and corners) that lie on the grid."""
        out = []
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                if dr or dc:
                    c = Cell(self.row + dr, self.col + dc)
                    if c.on(rows, cols):
                        out.append(c)
        return out

    def corners(self, rows: int, cols: int) -> list[Cell]:
        """The up to four diagonal neighbours that lie on the grid."""
        out = []
        for dr in (-1, 1):
            for dc in (-1, 1):
                c = Cell(self.row + dr, self.col + dc)
                if c.on(rows, cols):
                    out.append(c)
        return out

    def __str__(self) -> str:
        return self.label()


def column_label(col: int) -> str:
    """Column letters: 0 -> ``A``, 25 -> ``Z``, 26 -> ``AA`` (bijective base 26)."""
    if col < 0:
        raise ValueError("column must be >= 0")
    out = ""
    n = col + 1
    while n:
        n, rem = divmod(n - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def parse_cell(text: str, rows: int, cols: int) -> Cell:
    """Parse ``"E5"`` into a cell on the grid: ASCII letters in either case, surrounded by any
    number of :data:`BLANKS`, the row number without leading zeros.

    Raises :class:`Refused` with ``OFF_BOARD`` for text that is not a cell of this grid, so that an
    unclear or off-board call is refused and the shot is kept (002: "ask again"; 004: "refused").
    """
    if type(text) is str:
        # A call in the canonical form (what every client sends) is looked up in this grid's
        # table, which holds exactly what the parse below returns for those labels.
        cell = _cell_table(rows, cols).get(text)
        if cell is not None:
            return cell
    # Python's strip() and upper() are Unicode-wide ("\u3000E5", "\u0131" for I), other
    # languages' differ: only ASCII is folded, so that every implementation accepts the same.
    folded = text.strip(BLANKS)
    m = _CELL_RE.fullmatch(folded.upper()) if folded.isascii() else None
    if not m:
        raise Refused(ErrorCode.OFF_BOARD, f"{text!r} is not a cell (expected e.g. E5)")
    letters, digits = m.groups()
    col = 0
    for ch in letters:
        col = col * 26 + (ord(ch) - ord("A") + 1)
    cell = Cell(int(digits) - 1, col - 1)
    if not cell.on(rows, cols):
        raise Refused(
            ErrorCode.OFF_BOARD,
            f"{m.group()} is off the board (A1-{Cell(rows - 1, cols - 1).label()})",
        )
    return cell


@functools.lru_cache(maxsize=64)
def _cell_table(rows: int, cols: int) -> dict[str, Cell]:
    """Label -> cell for every cell of a ``rows`` x ``cols`` grid whose label parses (empty for
    a grid too large to be worth a table; rules allow at most 26 x 26)."""
    if not 0 < rows * cols <= 1 << 16:
        return {}
    table = {}
    for r in range(rows):
        for c in range(cols):
            cell = Cell(r, c)
            label = cell.label()
            if _CELL_RE.fullmatch(label):
                table[label] = cell
    return table
