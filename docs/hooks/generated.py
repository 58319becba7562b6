"""MkDocs hook: the tables of the docs that the code can answer, generated at build time
from ``perfsuite list --json`` and ``perfsuite plans --json`` so that they cannot drift.

A page asks for a table with an HTML comment on a line of its own:

- ``<!-- perfsuite-workloads -->``: every built-in workload (name, family, version, what it
  measures), each name linking to its family's page;
- ``<!-- perfsuite-workloads: FAMILY -->``: one section per workload of that family, with its
  parameters (type, default, quick preset, choices, help);
- ``<!-- perfsuite-plans -->``: the run plans shipped with the package;
- ``<!-- perfsuite-export-columns -->``: the columns of ``perfsuite export`` and
  ``perfsuite.load`` with what each holds (``perfsuite.analysis.export.COLUMNS``);
- ``<!-- perfsuite-submitted-records -->``: every record filed under ``submissions/``, with its
  system, workload, date and best headline, so that a record filed is listed without an edit.

It also escapes, on the CLI reference, the placeholders of the commands' help texts
(``<run_id>``, ``<records>``): mkdocs-click inserts help text as Markdown, where they would
be read as HTML tags and vanish from the page.

The build fails (a warning, and ``mkdocs build --strict``) when a family of workloads has no
page that shows it, or a page asks for a family that has no workloads. Only the built-in
workloads are listed (``PERFSUITE_PLUGINS`` empty), so the docs read the same wherever they
are built; the same setting keeps plugin commands out of the generated CLI reference.
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

log = logging.getLogger("mkdocs.hooks.generated")

MARKER = re.compile(r"^<!-- perfsuite-workloads(?::\s*(?P<family>[\w.]+))?\s*-->$", re.MULTILINE)
PLANS_MARKER = re.compile(r"^<!-- perfsuite-plans\s*-->$", re.MULTILINE)
COLUMNS_MARKER = re.compile(r"^<!-- perfsuite-export-columns\s*-->$", re.MULTILINE)
RECORDS_MARKER = re.compile(r"^<!-- perfsuite-submitted-records\s*-->$", re.MULTILINE)
SUBMISSIONS = Path(__file__).resolve().parents[2] / "submissions"
CLI_PAGE = "cli.md"
# The tags Markdown and mkdocs-click write; any other bare <word> on the CLI page is a placeholder.
HTML_TAGS = {
    "a", "b", "blockquote", "br", "code", "dd", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "li", "ol", "p", "pre", "span", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
BARE_TAG = re.compile(r"<(/?)([A-Za-z_][\w-]*)>")

_catalogue: list[dict[str, Any]] | None = None
_plans: list[dict[str, Any]] | None = None
_family_pages: dict[str, str] = {}  # family -> page path (docs-relative) that shows it


def on_config(config: Any) -> Any:
    # Built-ins only, here and in anything the build imports (mkdocs-click builds the CLI).
    os.environ["PERFSUITE_PLUGINS"] = ""
    return config


def perfsuite_json(*args: str) -> Any:
    """What ``perfsuite ARGS --json`` prints, built-in workloads only; a failure stops the build."""
    proc = subprocess.run(
        [sys.executable, "-m", "perfsuite", *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PERFSUITE_PLUGINS": ""},
        timeout=300,
    )
    if proc.returncode != 0:
        raise PluginError(f"perfsuite {' '.join(args)} --json failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def catalogue() -> list[dict[str, Any]]:
    """The built-in workloads as ``perfsuite list --json`` gives them (run once per build)."""
    global _catalogue
    if _catalogue is None:
        rows = perfsuite_json("list", "--device", "cpu")
        _catalogue = sorted((row for row in rows if "name" in row), key=lambda r: r["name"])
    return _catalogue


def plans() -> list[dict[str, Any]]:
    global _plans
    if _plans is None:
        _plans = sorted(perfsuite_json("plans"), key=lambda p: p["name"])
    return _plans


def on_files(files: Any, config: Any) -> Any:
    """Find which page shows which family before any page is rendered, so that the overview
    table can link each workload to its family's page."""
    _family_pages.clear()
    for file in files.documentation_pages():
        with open(file.abs_src_path, encoding="utf-8") as fh:
            text = fh.read()
        for match in MARKER.finditer(text):
            family = match.group("family")
            if family:
                _family_pages[family] = file.src_uri
    families = {row["category"] for row in catalogue()}
    for family in sorted(families - set(_family_pages)):
        log.warning("workloads of the family %r are on no page: add <!-- perfsuite-workloads: %s -->", family, family)
    for family in sorted(set(_family_pages) - families):
        log.warning("%s asks for the family %r, which has no workloads", _family_pages[family], family)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def table(match: re.Match) -> str:
        family = match.group("family")
        if family is None:
            return overview(page.file.src_uri)
        return family_sections(family)

    markdown = MARKER.sub(table, markdown)
    markdown = PLANS_MARKER.sub(lambda _: plans_table(), markdown)
    markdown = COLUMNS_MARKER.sub(lambda _: export_columns_table(), markdown)
    return RECORDS_MARKER.sub(lambda _: submitted_records_table(), markdown)


def on_page_content(html_text: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != CLI_PAGE:
        return html_text

    def escape(match: re.Match) -> str:
        if match.group(2).lower() in HTML_TAGS:
            return match.group(0)
        return f"&lt;{match.group(1)}{match.group(2)}&gt;"

    return BARE_TAG.sub(escape, html_text)


def cell(value: Any) -> str:
    """Text for a Markdown table cell: HTML escaped, pipes escaped, one line."""
    return html.escape(str(value), quote=False).replace("|", "\\|").replace("\n", " ")


def code(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    elif isinstance(value, bool):
        value = str(value).lower()
    return "`" + str(value).replace("|", "\\|").replace("`", "'") + "`"


def relative_link(from_page: str, to_page: str, anchor: str) -> str:
    """A link MkDocs resolves: the target page relative to the page that links to it."""
    depth = from_page.count("/")
    return "../" * depth + to_page + "#" + anchor


def overview(page_uri: str) -> str:
    lines = ["| workload | family | version | what it measures |", "| --- | --- | --- | --- |"]
    for row in catalogue():
        target = _family_pages.get(row["category"])
        name = f"`{row['name']}`"
        if target:
            name = f"[{name}]({relative_link(page_uri, target, row['name'])})"
        lines.append(f"| {name} | {row['category']} | {row['version']} | {cell(row['description'])} |")
    return "\n".join(lines)


def family_sections(family: str) -> str:
    rows = [row for row in catalogue() if row["category"] == family]
    out: list[str] = []
    for row in rows:
        # The workload's name is its heading's id (attr_list), so links read #kernels.gemm.
        heading = f"### {row['name']} {{ #{row['name']} }}"
        out += [heading, "", f"{cell(row['description'])} (version {row['version']}).", ""]
        params = row.get("params") or []
        if not params:
            out += ["No parameters.", ""]
            continue
        quick = row.get("quick") or {}
        out += ["| parameter | type | default | quick | choices | what it sets |", "|" + " --- |" * 6]
        for p in params:
            out.append(
                f"| `{p['name']}` | {p['type']} | {code(p['default'])} | {code(quick.get(p['name']))} "
                f"| {code(p.get('choices'))} | {cell(p['help'])} |"
            )
        out.append("")
    return "\n".join(out)


def plans_table() -> str:
    lines = ["| plan | what it runs | entries |", "| --- | --- | --- |"]
    for plan in plans():
        entries = "; ".join(cell(run) for run in plan["runs"])
        lines.append(f"| `{plan['name']}` | {cell(plan['description'])} | {entries} |")
    return "\n".join(lines)


def export_columns_table() -> str:
    """The export's columns from the one definition ``perfsuite export`` and ``perfsuite.load``
    share (imported here: the module needs nothing heavier than the schemas)."""
    from perfsuite.analysis.export import COLUMN_TYPES, COLUMNS

    lines = ["| column | type | what it holds |", "| --- | --- | --- |"]
    lines += [f"| `{name}` | {COLUMN_TYPES[name]} | {cell(what)} |" for name, what in COLUMNS]
    return "\n".join(lines)


def best_headline(record: dict) -> dict | None:
    """The best of the record's case headlines (largest where higher is better, else smallest)
    among those in the unit of its first: one figure a row can show for a run of many cases."""
    from perfsuite.schemas.headline import case_headline

    primary = record["workload"].get("primary_metric")
    cases = dict.fromkeys(m["case"] for m in record["metrics"])
    heads = [h for h in (case_headline(record["metrics"], c, primary) for c in cases) if h is not None]
    if not heads:
        return None
    same = [h for h in heads if h["unit"] == heads[0]["unit"] and h["name"] == heads[0]["name"]]
    pick = max if same[0].get("higher_is_better", True) else min
    return pick(same, key=lambda h: h["value"])


def submitted_records_table() -> str:
    """One row per record under ``submissions/<org>/results/``, by system, workload and date."""
    from perfsuite.schemas.reading import load_record_file

    rows = []
    for path in SUBMISSIONS.glob("*/results/*/*/*.json"):
        record = load_record_file(path)
        best = best_headline(record)
        figure = f"{best['value']:,.4g} {best['unit']} ({cell(best['case'])})" if best else ""
        rows.append((path.parts[-3], record["workload"]["name"], record["started_at"], record, figure))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    lines = ["| run id | system | workload | version | started | cases | best case headline |"]
    lines.append("|" + " --- |" * 7)
    for system, workload, started, record, figure in rows:
        cases = len(dict.fromkeys(m["case"] for m in record["metrics"]))
        lines.append(
            f"| `{record['run_id'][:8]}` | {system} | `{workload}` | {record['workload']['version']} "
            f"| {started[:16].replace('T', ' ')} | {cases} | {figure} |"
        )
    return "\n".join(lines)
