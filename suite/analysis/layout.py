"""Tables that fit the terminal without breaking what people read or type next.

A table is declared as :class:`Column` specs and rows of plain strings; the width is decided
when it is printed (:class:`FittedTable` is a rich renderable), so the same table fits an
80-column terminal, a 100-column CI log and a wide screen:

- a column with no value in any row is left out (a CPU run shows no GPU columns);
- a column that is not ``wrap`` (names, run ids, numbers with their units) is never cut and
  never folded: it is as wide as its widest cell;
- a ``wrap`` column (descriptions, errors) breaks between words only; a single word longer
  than :data:`MAX_WORD` (a long path, a URL) is the one thing that may fold;
- a ``split`` column (metric names) is shown whole, broken after its ``split`` characters
  (``early_stopping_`` / ``latency_p90_ms``) where it is narrower than a name: never cut, never
  dropped, never folded mid-word;
- when the columns cannot fit, wrapping and split columns narrow toward :data:`SNUG`; where
  that is not enough, those with the highest ``drop`` rank are left out first (``drop=0``:
  always shown), and a line under the table names them; a header may break between its words;
- where the columns always shown still cannot fit, their wrapping and split columns narrow
  further, to their longest word or piece (more lines a row, nothing lost);
- only where even that cannot fit (each column always shown at its longest unbreakable word,
  two spaces apart, is wider than the terminal) is each row printed as ``header  value`` lines
  instead (as ``psql -x`` does), so that nothing is cut. The filed submissions' tables stay
  tables down to 80 to 95 columns (``perfsuite results`` of the newest 50 runs: 76; of all of
  them: 93; ``perfsuite compare`` of two runs: 80 for collectives, 95 for two copy benchmarks
  of 80 metrics each): 100 columns hold each (``tests/test_narrow_tables.py``).

A table may hold lines of its own between its rows (:meth:`FittedTable.add_line`: a run's id,
workload and date above its figures), wrapped at the full width and never counted in a
column's width: a long workload name then costs no column its room.

The same specs render as a GitHub-flavoured Markdown table (:func:`markdown`) for
``$GITHUB_STEP_SUMMARY``. Cells are plain text (:func:`perfsuite.text.plain`): never markup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.text import clean, plain

MAX_WORD = 40  # a longer unbroken word (a path, a URL) in a wrapping column may fold rather than widen the table
COMFORT = 16  # a wrapping column is not made narrower than this (or its longest cell), lest it fold into a tower
SNUG = 12  # ...unless a column would be left out: then it may narrow to this (or its longest word)
NARROWEST_AT, SNUG_AT = 2, 3  # where _needs gives these widths
GAP = 2  # columns are two spaces apart: one separator and one cell of padding
MAX_REFLOWED = 400  # distinct cells of narrowed wrapping columns tried at other widths (not a long history's)


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "left"  # "left" or "right" (numbers)
    wrap: bool = False  # prose: may break between words; otherwise never broken or cut
    drop: int = 0  # 0: always shown; higher ranks are left out first when the table does not fit
    split: str = ""  # a name that may break after these characters (a metric's "_") rather than be cut or dropped


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


SHORT_TAIL = 2  # a name's last piece this short (a unit: "s", "ms") stays with the one before it


def _pieces(text: str, split: str) -> list[str]:
    """``text`` in the pieces a line may break between: after a space, and after each of the
    ``split`` characters (``early_``, ``stopping_``, ``latency_``, ``p90_ms``): a word's last
    piece of :data:`SHORT_TAIL` characters or fewer is kept with the one before it, so that
    ``samples_per_s`` breaks as ``samples_`` / ``per_s``, never leaving ``s`` alone."""
    out: list[str] = []
    piece = ""
    for n, char in enumerate(text):
        piece += char
        if char == " " or char in split or n == len(text) - 1:
            # a word ends at a space or at the text's end: "per_s", and "token_j *" before a space
            ends_word = char == " " or char not in split
            if split and ends_word and out and out[-1][-1:] in split and len(piece.rstrip()) <= SHORT_TAIL:
                out[-1] += piece
            else:
                out.append(piece)
            piece = ""
    return out


def _longest_piece(text: str, split: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(piece.strip()) for piece in _pieces(text, split)), default=0)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _needs(col: Column, cells: list[str]) -> tuple[int, int, int, int]:
    """(comfortable, natural, narrowest, snug) width of a column: its content never cut or folded
    mid-word; a wrapping or split column is comfortable at :data:`COMFORT` (or its natural width
    where that is less), snug at :data:`SNUG`, and at its narrowest as wide as its longest word
    (or piece)."""
    widest = max(map(_width, cells), default=0)  # each cell measured once: a history has thousands
    natural = max(_width(col.header), widest)
    header_word = _longest_word(col.header)
    if col.wrap or col.split:
        if col.split:
            words = max([header_word] + [_longest_piece(c, col.split) for c in set(cells)])
        else:  # an indented cell (a case under its run) keeps its indent on every line
            words = max([header_word] + [min(_longest_word(c), MAX_WORD) + _indent(c) for c in cells])
        narrowest = max(1, words)
        comfortable = max(narrowest, min(natural, COMFORT))
        return comfortable, max(1, natural), narrowest, max(narrowest, min(comfortable, SNUG))
    fixed = max(header_word, widest)
    return fixed, natural, fixed, fixed


def widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> tuple[list[int], list[int]] | None:
    """(the columns shown, their widths) for a table ``width`` cells wide: empty columns left out,
    then columns by ``drop`` rank until the rest fits with its wrapping and split columns snug (a
    dropped one that fits after all comes back), then, where the columns always shown still do
    not fit, those at their narrowest; the wrapping and split columns are given the space left,
    toward comfortable, then natural. None where even that cannot fit."""
    shown = visible(columns, rows)
    needs = {i: _needs(columns[i], [row[i] or "" for row in rows]) for i in shown}

    def overhead(n: int) -> int:
        return GAP * max(0, n - 1)

    def least(cols: list[int], at: int = 0) -> int:
        return sum(needs[i][at] for i in cols) + overhead(len(cols))

    dropped = []
    while least(shown, SNUG_AT) > width:  # a column is left out where the rest cannot fit snug
        droppable = [i for i in shown if columns[i].drop > 0]
        if not droppable:
            break
        dropped.append(max(droppable, key=lambda i: (columns[i].drop, i)))
        shown.remove(dropped[-1])
    at = SNUG_AT if least(shown, SNUG_AT) <= width else NARROWEST_AT
    if at == SNUG_AT:
        for i in sorted(dropped, key=lambda i: (columns[i].drop, i)):  # what fits beside a wide one left out
            if least(sorted([*shown, i]), SNUG_AT) <= width:
                shown = sorted([*shown, i])
    sizes = {i: needs[i][at] for i in shown}
    spare = width - least(shown, at)
    wrapping = [i for i in shown if columns[i].wrap or columns[i].split]
    if spare < 0:
        return None

    # Grow the wrapping columns toward their comfortable width (where they are narrower), then
    # toward their natural width, the smallest need first, each its share of the space left.
    for target in (0, 1):
        for n, i in enumerate(sorted(wrapping, key=lambda i: needs[i][target] - sizes[i])):
            grow = min(max(needs[i][target] - sizes[i], 0), max(spare // (len(wrapping) - n), 0))
            sizes[i] += grow
            spare -= grow
    # A wrapping column breaks between words: its cells may use less than it was given (14 cells
    # for "concurrency sweep" hold "concurrency" as 11 do). What they leave goes, a few cells at a
    # time, to the column where they save the most lines (where the cells to try are few).
    narrow = [i for i in wrapping if sizes[i] < needs[i][1]]
    cells = {i: Counter(row[i] or "" for row in rows) for i in narrow}
    if narrow and sum(map(len, cells.values())) <= MAX_REFLOWED:
        for i in narrow:
            used = _used(columns[i], cells[i], sizes[i])
            spare += sizes[i] - used
            sizes[i] = used
        while spare > 0:
            steps = []  # (lines saved per cell given, cells given, column)
            for i in narrow:
                now = _line_count(columns[i], cells[i], sizes[i])
                for k in range(1, min(spare, needs[i][1] - sizes[i]) + 1):
                    saved = now - _line_count(columns[i], cells[i], sizes[i] + k)
                    if saved > 0:
                        steps.append((saved / k, -k, i))
                        break
            if not steps:
                break
            _, minus_k, i = max(steps)  # the most lines saved a cell, then the fewest cells
            sizes[i] += -minus_k
            spare -= -minus_k
    for i in shown:  # a header wider than its cells may still use the space left
        if spare <= 0:
            break
        grow = min(needs[i][1] - sizes[i], spare)
        sizes[i] += grow
        spare -= grow
    return shown, [sizes[i] for i in shown]


def _cell_lines(col: Column, cell: str, size: int) -> list[str]:
    """A wrapping column's cell as its lines where the column is ``size`` cells wide: broken
    between words (a split column's also after its split characters), its indent (a case under
    its run) kept on every line."""
    lead = _indent(cell)
    return [" " * lead + line for line in broken(cell[lead:], max(1, size - lead), col.split)]


def _line_count(col: Column, cells: Counter[str], size: int) -> int:
    """The lines a wrapping column's cells (each as often as it is in the column) take where
    the column is ``size`` cells wide."""
    return sum(n * len(_cell_lines(col, c, size)) for c, n in cells.items())


def _used(col: Column, cells: Iterable[str], size: int) -> int:
    """The cells a wrapping column's widest line takes where the column is ``size`` cells wide
    (``cells``: each distinct cell once)."""
    from rich.cells import cell_len

    lines = [_longest_word(col.header)] + [cell_len(line) for c in cells for line in _cell_lines(col, c, size)]
    return min(size, max(lines))


def broken(text: str, width: int, split: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` cells, broken between words and after the ``split``
    characters; a piece wider than ``width`` alone (a long path) is folded. Trailing spaces dropped."""
    from rich.cells import cell_len, chop_cells

    out: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for piece in _pieces(paragraph, split):
            if line and cell_len((line + piece).rstrip()) > width:
                out.append(line.rstrip())
                line = piece.lstrip()
            else:
                line += piece
            while cell_len(line.rstrip()) > width:  # one piece wider than the line: folded
                first, *_ = chop_cells(line, width)
                out.append(first)
                line = line[len(first) :]
        out.append(line.rstrip())
    return out


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
        self.lines: dict[int, tuple[str, int]] = {}  # row index -> a line of its own (text, indent)
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

    def add_line(self, text: Any, indent: int = 0) -> None:
        """A line of its own between the rows, across the columns (a run's id and workload above
        its figures), wrapped between words at the full width, ``indent`` cells in: no column is
        made wider for it."""
        self.lines[len(self.rows)] = (clean(text), indent)
        self.rows.append([""] * len(self.columns))
        self.styles.append("")
        self.cell_styles.append({})

    def line_text(self, n: int, width: int) -> list[str]:
        """The line of its own at row ``n``, as printed at ``width`` cells."""
        text, indent = self.lines[n]
        indent = min(indent, max(0, width - 1))
        return [" " * indent + line for line in broken(text, width - indent)]

    def shown_cell(self, row: Sequence[str], i: int, size: int) -> str:
        """A cell as printed in a column ``size`` cells wide: a wrapping column's cell that is wider
        broken into lines between its words (a split column's also after its split characters),
        its indent kept on each line (as :func:`widths` measured it); any other as it is."""
        cell = row[i] or ""
        col = self.columns[i]
        if (col.split or col.wrap) and _width(cell) > size:
            return "\n".join(_cell_lines(col, cell, size))
        return cell

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

        def new_table(header: bool) -> Table:
            t = Table(
                box=box.SIMPLE_HEAD,
                show_edge=False,
                padding=(0, 1),
                collapse_padding=True,
                pad_edge=False,
                show_header=header,
            )
            for i, size in zip(shown, sizes, strict=True):
                col = self.columns[i]
                t.add_column(
                    Text(col.header, no_wrap=False, overflow="fold"),  # a header may break between its words
                    justify=col.justify,  # type: ignore[arg-type]
                    width=size,
                    no_wrap=not (col.wrap or col.split),
                    overflow="fold",  # never reached by a cell that is not wrap: its width is its widest cell
                )
            return t

        head = new_table(True) if shown else None
        parts: list[Any] = [head] if head is not None else []
        body = _PlainRows.of(self, shown, sizes, width)
        if body is not None:
            parts.append(body)  # the header (and its rule) from rich, the rows here
        else:
            current = head
            for n, (row, style, cell_styles) in enumerate(zip(self.rows, self.styles, self.cell_styles, strict=True)):
                if n in self.lines:
                    parts += [plain(line) for line in self.line_text(n, width)]
                    current = None
                    continue
                if current is None:  # the rows after a line of their own: the same columns, no header
                    current = new_table(False)
                    parts.append(current)
                cells = (
                    plain(self.shown_cell(row, i, size), style=cell_styles.get(i, ""))
                    for i, size in zip(shown, sizes, strict=True)
                )
                current.add_row(*cells, style=style or None)
        title = [plain(self.title, style="bold")] if self.title else []
        return Group(*title, *parts, *([plain(caption, style="dim")] if caption else []))

    def stacked(self):
        """Too narrow for the columns that must be shown: each row as ``header  value`` lines
        (values wrap between words), rows one after another, as ``psql -x`` does; a line of its
        own stays a line."""
        from rich.console import Group
        from rich.padding import Padding
        from rich.table import Table
        from rich.text import Text

        parts: list = [plain(self.title, style="bold")] if self.title else []
        shown = visible(self.columns, self.rows)
        number = 0
        for n, row in enumerate(self.rows):
            if n in self.lines:  # wrapped by rich at the width it is printed at, its indent kept
                text, indent = self.lines[n]
                parts.append(Padding(plain(text), (0, 0, 0, indent), expand=False))
                continue
            number += 1
            grid = Table.grid(padding=(0, 2))
            grid.add_column(no_wrap=True, style="bold")
            grid.add_column(overflow="fold")
            for i in shown:
                if row[i]:
                    grid.add_row(Text(self.columns[i].header), plain(row[i]))
            parts += [Text(f"-[ {number} ]-", style="dim"), grid]
        if self.caption:
            parts.append(plain(self.caption))
        return Group(*parts)

    def __rich_console__(self, console, options):
        yield self.table(options.max_width)

    def markdown(self) -> str:
        rows = [[self.lines[n][0], *row[1:]] if n in self.lines else row for n, row in enumerate(self.rows)]
        return markdown(self.columns, rows, self.title)


class _PlainRows:
    """The rows of a fitted table where each is one line of unstyled text, as lines of their own:
    what rich's table makes of them (cells padded to their column, two spaces apart; a right-
    justified cell's trailing spaces dropped), at a hundredth of its time (a history of 5,000
    runs: 1 s of rich's), and the table's lines of their own. :meth:`of` gives None where a row
    is styled or a cell does not fit its column on one line: rich lays those out.
    ``tests/test_layout_fast_rows.py`` holds the two to the same characters."""

    def __init__(self, lines: list[list[str]]) -> None:
        self.lines = lines  # each line as its cells, padded, the gap before each but the first

    @classmethod
    def of(cls, table: FittedTable, shown: list[int], sizes: list[int], width: int) -> _PlainRows | None:
        from rich.cells import cell_len

        if not shown or any(table.styles) or any(table.cell_styles):
            return None
        right = [table.columns[i].justify == "right" for i in shown]
        gap = " " * GAP
        lines = []
        for n, row in enumerate(table.rows):
            if n in table.lines:  # a line of its own, broken to the width as rich is given it
                lines += [[line] for line in table.line_text(n, width)]
                continue
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
