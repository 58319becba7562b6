"""Tables that fit the terminal without breaking what people read or type next.

A table is declared as :class:`Column` specs and rows of plain strings; the width is decided
when it is printed (:class:`FittedTable` is a rich renderable), so the same table fits an
80-column terminal, a 100-column CI log and a wide screen:

- a column with no value in any row is left out (a CPU run shows no GPU columns);
- a column that is not ``wrap`` (names, run ids, numbers with their units) is never cut and
  never folded: it is as wide as its widest cell;
- a ``wrap`` column (descriptions, errors) breaks between words only; a single word longer
  than :data:`MAX_WORD` (a long path, a URL) is the one thing that may fold;
- when the columns cannot fit, those with the highest ``drop`` rank are left out first
  (``drop=0``: always shown); a header may break between its words;
- where even the columns always shown cannot fit, each row is printed as ``header  value``
  lines instead (as ``psql -x`` does), so that nothing is cut.

The same specs render as a GitHub-flavoured Markdown table (:func:`markdown`) for
``$GITHUB_STEP_SUMMARY``. Cells are plain text (:func:`perfsuite.text.plain`): never markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.text import clean, plain

MAX_WORD = 40  # a longer unbroken word (a path, a URL) in a wrapping column may fold rather than widen the table
COMFORT = 16  # a wrapping column is not made narrower than this (or its longest cell), lest it fold into a tower
GAP = 2  # columns are two spaces apart: one separator and one cell of padding


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "left"  # "left" or "right" (numbers)
    wrap: bool = False  # prose: may break between words; otherwise never broken or cut
    drop: int = 0  # 0: always shown; higher ranks are left out first when the table does not fit


def _width(text: str) -> int:
    if text.isascii() and text.isprintable():  # most cells: one line, a cell per character
        return len(text)
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.split("\n")), default=0)


def _longest_word(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(word) for word in text.split()), default=0)


def visible(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    """Indexes of the columns that have a value in some row (all of them for an empty table)."""
    if not rows:
        return list(range(len(columns)))
    return [i for i in range(len(columns)) if any((row[i] or "").strip() for row in rows)]


def _needs(col: Column, cells: list[str]) -> tuple[int, int]:
    """(narrowest, natural) width of a column: its content never cut or folded mid-word."""
    widest = max(map(_width, cells), default=0)  # each cell measured once: a history has thousands
    natural = max(_width(col.header), widest)
    header_word = _longest_word(col.header)
    if col.wrap:
        words = max([header_word] + [min(_longest_word(c), MAX_WORD) for c in cells])
        return max(1, words, min(natural, COMFORT)), max(1, natural)
    return max(header_word, widest), natural


def widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> tuple[list[int], list[int]] | None:
    """(the columns shown, their widths) for a table ``width`` cells wide: empty columns left out,
    then columns by ``drop`` rank until the rest fits, wrapping columns given the space left;
    None where even the columns that are always shown cannot fit."""
    shown = visible(columns, rows)
    needs = {i: _needs(columns[i], [row[i] or "" for row in rows]) for i in shown}

    def overhead(n: int) -> int:
        return GAP * max(0, n - 1)

    def least(cols: list[int]) -> int:
        return sum(needs[i][0] for i in cols) + overhead(len(cols))

    dropped = []
    while least(shown) > width:
        droppable = [i for i in shown if columns[i].drop > 0]
        if not droppable:
            break
        dropped.append(max(droppable, key=lambda i: (columns[i].drop, i)))
        shown.remove(dropped[-1])
    for i in sorted(dropped, key=lambda i: (columns[i].drop, i)):  # what fits beside a wide one left out
        if least(sorted([*shown, i])) <= width:
            shown = sorted([*shown, i])
    sizes = {i: needs[i][0] for i in shown}
    spare = width - least(shown)
    wrapping = [i for i in shown if columns[i].wrap]
    if spare < 0:
        return None
    # Grow the wrapping columns toward their natural width, the smallest need first.
    for n, i in enumerate(sorted(wrapping, key=lambda i: needs[i][1] - sizes[i])):
        if spare <= 0:
            break
        share = spare // (len(wrapping) - n)
        grow = min(needs[i][1] - sizes[i], max(share, 0))
        sizes[i] += grow
        spare -= grow
    for i in shown:  # a header wider than its cells may still use the space left
        if spare <= 0:
            break
        grow = min(needs[i][1] - sizes[i], spare)
        sizes[i] += grow
        spare -= grow
    return shown, [sizes[i] for i in shown]


class FittedTable:
    """A rich renderable: the table laid out for the width it is printed at."""

    def __init__(
        self,
        columns: Sequence[Column],
        rows: Sequence[Sequence[Any]] = (),
        title: str | None = None,
        caption: str | None = None,
    ) -> None:
        self.columns = list(columns)
        self.rows: list[list[str]] = []
        self.styles: list[str] = []
        self.cell_styles: list[dict[int, str]] = []
        self.title = title
        self.caption = caption
        for row in rows:
            self.add_row(*row)

    def add_row(self, *cells: Any, style: str = "", cell_styles: dict[int, str] | None = None) -> None:
        """A row of plain text (``cell_styles``: column index -> a rich style, e.g. a verdict's colour)."""
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([clean(c) for c in cells])
        self.styles.append(style)
        self.cell_styles.append(dict(cell_styles or {}))

    def table(self, width: int):
        """The rich renderable for ``width`` cells: the title, the table, the caption (title and
        caption as lines of their own, wrapped between words at the full width)."""
        from rich import box
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        fitted = widths(self.columns, self.rows, width)
        if fitted is None:
            return self.stacked()
        shown, sizes = fitted
        left_out = [self.columns[i].header for i in visible(self.columns, self.rows) if i not in shown]
        caption = "\n".join(
            ([self.caption] if self.caption else [])
            + ([f"left out for the width ({width} columns): {', '.join(left_out)}"] if left_out else [])
        )
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), collapse_padding=True, pad_edge=False)
        for i, size in zip(shown, sizes, strict=True):
            col = self.columns[i]
            t.add_column(
                Text(col.header, no_wrap=False, overflow="fold"),  # a header may break between its words
                justify=col.justify,  # type: ignore[arg-type]
                width=size,
                no_wrap=not col.wrap,
                overflow="fold",  # never reached by a cell that is not wrap: its width is its widest cell
            )
        body = _PlainRows.of(self, shown, sizes)
        if body is None:
            for row, style, cell_styles in zip(self.rows, self.styles, self.cell_styles, strict=True):
                t.add_row(*(plain(row[i], style=cell_styles.get(i, "")) for i in shown), style=style or None)
        title = [plain(self.title, style="bold")] if self.title else []
        parts = [t] if body is None else [t, body]  # the header (and its rule) from rich, the rows here
        return Group(*title, *parts, *([plain(caption, style="dim")] if caption else []))

    def stacked(self):
        """Too narrow for the columns that must be shown: each row as ``header  value`` lines
        (values wrap between words), rows one after another, as ``psql -x`` does."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        parts: list = [plain(self.title, style="bold")] if self.title else []
        shown = visible(self.columns, self.rows)
        for n, row in enumerate(self.rows):
            grid = Table.grid(padding=(0, 2))
            grid.add_column(no_wrap=True, style="bold")
            grid.add_column(overflow="fold")
            for i in shown:
                if row[i]:
                    grid.add_row(Text(self.columns[i].header), plain(row[i]))
            parts += [Text(f"-[ {n + 1} ]-", style="dim"), grid]
        if self.caption:
            parts.append(plain(self.caption))
        return Group(*parts)

    def __rich_console__(self, console, options):
        yield self.table(options.max_width)

    def markdown(self) -> str:
        return markdown(self.columns, self.rows, self.title)


class _PlainRows:
    """The rows of a fitted table where each is one line of unstyled text, as lines of their own:
    what rich's table makes of them (cells padded to their column, two spaces apart; a right-
    justified cell's trailing spaces dropped), at a hundredth of its time (a history of 5,000
    runs: 1 s of rich's). :meth:`of` gives None where a row is styled or a cell does not fit its
    column on one line: rich lays those out. ``tests/test_layout_fast_rows.py`` holds the two to
    the same characters."""

    def __init__(self, lines: list[list[str]]) -> None:
        self.lines = lines  # each line as its cells, padded, the gap before each but the first

    @classmethod
    def of(cls, table: FittedTable, shown: list[int], sizes: list[int]) -> _PlainRows | None:
        from rich.cells import cell_len

        if not shown or any(table.styles) or any(table.cell_styles):
            return None
        right = [table.columns[i].justify == "right" for i in shown]
        gap = " " * GAP
        lines = []
        for row in table.rows:
            cells = []
            for i, size, to_right in zip(shown, sizes, right, strict=True):
                cell = row[i] or ""
                if to_right:
                    cell = cell.rstrip()
                if "\n" in cell or "\t" in cell:
                    return None
                pad = size - (len(cell) if cell.isascii() and cell.isprintable() else cell_len(cell))
                if pad < 0:
                    return None
                cells.append(" " * pad + cell if to_right else cell + " " * pad)
            lines.append([cells[0], *(gap + cell for cell in cells[1:])])
        return cls(lines)

    def __rich_console__(self, console, options):
        from rich.segment import Segment

        newline = Segment.line()
        for line in self.lines:
            # a segment a cell: rich measures each (cropping to the width), and a short cell it
            # has met (a CI with its en dash) is remembered, where a whole line would be counted
            # character by character
            for cell in line:
                yield Segment(cell)
            yield newline


def print_table(con, table: FittedTable) -> None:
    """``con.print(table)``, the same characters, with the table's plain one-line rows (where
    the layout made them: :class:`_PlainRows`) written to the console's file a line at a time:
    rich would take each of a history's 25,000 cells as a segment to measure and crop, a tenth
    of a second, for lines laid out to fit its width already."""
    rendered = table.table(con.width)
    parts = getattr(rendered, "renderables", [rendered])
    body = [part for part in parts if isinstance(part, _PlainRows)]
    if not body or con.record or con.is_jupyter:  # rich keeps (or renders) what it prints there
        con.print(table)
        return
    for part in parts:
        if isinstance(part, _PlainRows):
            con.file.write("".join("".join(line) + "\n" for line in part.lines))
            con.file.flush()
        else:
            con.print(part)


NO_VALUE = frozenset({"", "n/a", "N/A", "-"})


def plain_text(value: Any) -> str:
    """The characters of a rich Text, or ``str(value)``; '' for None."""
    text = getattr(value, "plain", None)  # rich Text
    return text if isinstance(text, str) else ("" if value is None else str(value))


def refit(renderable: Any) -> Any:
    """A workload's own rich table (``Workload.render_details``) laid out as the host's are:
    columns that only say n/a left out, none cut, rows stacked where they cannot fit. A Group
    is refitted table by table; anything else is returned as it is."""
    from rich.console import Group
    from rich.table import Table

    if isinstance(renderable, Group):
        return Group(*(refit(r) for r in renderable.renderables))
    if not isinstance(renderable, Table):
        return renderable
    cells = [[plain_text(c) for c in col.cells] for col in renderable.columns]
    keep = [i for i, col in enumerate(cells) if not col or any(c.strip() not in NO_VALUE for c in col)]
    columns = [
        Column(plain_text(renderable.columns[i].header).replace("\n", " "), justify=renderable.columns[i].justify)
        for i in keep
    ]
    rows = [[cells[i][r] for i in keep] for r in range(renderable.row_count)]
    title, caption = plain_text(renderable.title) or None, plain_text(renderable.caption) or None
    return FittedTable(columns, rows, title=title, caption=caption)


def markdown(columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str | None = None) -> str:
    """A GitHub-flavoured Markdown table of the same columns (empty ones left out, none dropped
    for width): for ``$GITHUB_STEP_SUMMARY`` and pull-request comments."""
    shown = visible(columns, rows)

    def cell(text: str) -> str:
        return clean(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>") or " "

    lines = [f"**{cell(title)}**", ""] if title else []
    lines.append("| " + " | ".join(cell(columns[i].header) for i in shown) + " |")
    lines.append("|" + "|".join("---:" if columns[i].justify == "right" else "---" for i in shown) + "|")
    lines += ["| " + " | ".join(cell(row[i] or "") for i in shown) + " |" for row in rows]
    return "\n".join(lines) + "\n"
