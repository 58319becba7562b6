"""A fitted table whose rows are each one line of plain text is printed without rich laying out
every cell (a history of 5,000 runs: a second of rich's time), and reads the same, character for
character and escape for escape, as rich's table of the same rows: narrow and wide terminals,
left and right columns, wide characters, columns dropped for the width, titles and captions."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console

from perfsuite.analysis import layout
from perfsuite.analysis.layout import Column, FittedTable

CELLS = ["a", "bb", "1.234", "naïve", "日本語", "x y z", "  indented", "trail  ", "", "1.1–1.3", "step +5.00% (p 1e-5)"]


def printed(table: FittedTable, width: int, terminal: bool) -> str:
    console = Console(width=width, force_terminal=terminal, color_system="truecolor" if terminal else None)
    with console.capture() as out:
        console.print(table)
    return out.get()


def by_rich(table: FittedTable, width: int, terminal: bool, monkeypatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(layout._PlainRows, "of", classmethod(lambda cls, *args: None))
        return printed(table, width, terminal)


def random_table(rng: random.Random) -> FittedTable:
    columns = [
        Column(f"h{i} " + "w" * rng.randint(0, 12), justify=rng.choice(["left", "right"]), wrap=rng.random() < 0.3,
               drop=rng.randint(0, 3))
        for i in range(rng.randint(1, 6))
    ]  # fmt: skip
    table = FittedTable(columns, title=rng.choice([None, "a title"]), caption=rng.choice([None, "a caption"]))
    for _ in range(rng.randint(0, 8)):
        table.add_row(*[rng.choice(CELLS) * rng.randint(1, 2) for _ in columns])
    return table


def test_plain_rows_read_as_richs_table_of_them(monkeypatch):
    rng = random.Random(20261127)
    fast = 0
    for _ in range(150):
        table = random_table(rng)
        for width in (30, 80, 120):
            fast += any(isinstance(part, layout._PlainRows) for part in table.table(width).renderables)
            for terminal in (False, True):
                assert printed(table, width, terminal) == by_rich(table, width, terminal, monkeypatch)
    assert fast > 100  # most of these tables took the plain path


@pytest.mark.parametrize(
    ("style", "cell_styles", "cells"),
    [("bold", None, ("a", "1")), ("", {1: "red"}, ("a", "1")), ("", None, ("a\nb", "1"))],
    ids=["a styled row", "a styled cell", "a cell of two lines"],
)
def test_a_styled_row_or_a_cell_of_two_lines_is_laid_out_by_rich(style, cell_styles, cells, monkeypatch):
    table = FittedTable([Column("name"), Column("value", justify="right")])
    table.add_row("plain", "2")
    table.add_row(*cells, style=style, cell_styles=cell_styles)
    assert not any(isinstance(part, layout._PlainRows) for part in table.table(80).renderables)
    assert printed(table, 80, True) == by_rich(table, 80, True, monkeypatch)


def test_print_table_writes_what_rich_prints(monkeypatch):
    """``print_table`` writes the plain rows to the console's file itself: the same characters."""
    rng = random.Random(20261128)
    for _ in range(60):
        table = random_table(rng)
        for width in (30, 120):
            for terminal in (False, True):
                out = io.StringIO()
                con = Console(
                    file=out, width=width, force_terminal=terminal, color_system="truecolor" if terminal else None
                )
                layout.print_table(con, table)
                assert out.getvalue() == by_rich(table, width, terminal, monkeypatch)
