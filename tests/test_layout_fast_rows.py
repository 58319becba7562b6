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

NAMES = ["goodput_at_slo_rps", "early_stopping_latency_p90_ms", "energy_per_output_token_j *", "  in-place 1 GiB"]
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


def random_table(rng: random.Random, lines: bool = False) -> FittedTable:
    """A table of random cells; with ``lines``, also split columns of names and lines of their own."""
    columns = [
        Column(f"h{i} " + "w" * rng.randint(0, 12), justify=rng.choice(["left", "right"]), wrap=rng.random() < 0.3,
               drop=rng.randint(0, 3), split="_" if lines and rng.random() < 0.3 else "")
        for i in range(rng.randint(1, 6))
    ]  # fmt: skip
    table = FittedTable(columns, title=rng.choice([None, "a title"]), caption=rng.choice([None, "a caption"]))
    for _ in range(rng.randint(0, 8)):
        if lines and rng.random() < 0.3:
            table.add_line(" ".join(rng.choice(CELLS + NAMES) for _ in range(rng.randint(1, 9))), rng.randint(0, 4))
            continue
        table.add_row(*[rng.choice(CELLS + (NAMES if lines else [])) * rng.randint(1, 2) for _ in columns])
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


def test_lines_of_their_own_and_broken_names_read_as_richs_table_of_them(monkeypatch):
    """A run's line of its own between the rows and a metric's name broken after its underscores:
    the plain path and rich's print the same characters, and no line is wider than the terminal."""
    rng = random.Random(20261129)
    fast = 0
    for _ in range(120):
        table = random_table(rng, lines=True)
        for width in (30, 80, 120):
            fast += any(isinstance(part, layout._PlainRows) for part in table.table(width).renderables)
            for terminal in (False, True):
                text = printed(table, width, terminal)
                assert text == by_rich(table, width, terminal, monkeypatch)
                if not terminal:
                    assert all(len(line) <= width for line in text.splitlines())
    assert fast > 50


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
