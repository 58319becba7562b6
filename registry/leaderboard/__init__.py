"""The public leaderboard: a static site written from the registry (no server, no network).

    from registry.leaderboard import build_site
    build_site(registry, Path("site"))   # index.html, workloads/, systems/, records/, static/

Pages come from Jinja2 templates with autoescaping on, so every text that came from a
submission (system names, submitters, parameters, case labels) is escaped. Tables sort
and filter with plain JavaScript (``static/leaderboard.js``); each result links to the
JSON of its records, copied into ``records/``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .data import load
from .roofline_svg import roofline_svg

HERE = Path(__file__).resolve().parent


def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v: "" if v is None else f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    env.filters["pct"] = lambda v: "" if v is None else f"{v * 100:.1f}%"
    env.filters["params"] = lambda p: ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(p.items())) or "defaults"
    return env


def _roofline(points, ceiling) -> str | None:
    memory = ceiling.get("memory")
    peaks = {case: value for case, (value, _unit, name) in ceiling.items() if name == "tflops"}
    plotted = []
    for p in points:
        if "tflops" in p.metrics and "gbps" in p.metrics and p.metrics["gbps"][0] > 0:
            tflops, gbps = p.metrics["tflops"][0], p.metrics["gbps"][0]
            plotted.append((f"{p.workload} {p.case}", tflops * 1e12 / (gbps * 1e9), tflops))
    return roofline_svg(plotted, memory[0] if memory else None, peaks)


def build_site(registry, out: Path) -> dict[str, int]:
    """Write the site into ``out`` (created; files there are overwritten). Returns counts."""
    from sqlalchemy import select

    from ..models import Run

    out = Path(out)
    with registry.session() as session:
        boards, systems, points, ceilings = load(session)
        run_ids = sorted({rid for b in boards for row in b.rows for rid in row.run_ids})
        (out / "records").mkdir(parents=True, exist_ok=True)
        for start in range(0, len(run_ids), 500):
            for run_id, record in session.execute(
                select(Run.run_id, Run.record).where(Run.run_id.in_(run_ids[start : start + 500]))
            ):
                # as the runner writes a record file (its sha256 covers the content, not the layout)
                (out / "records" / f"{run_id}.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    env = _environment()
    (out / "workloads").mkdir(exist_ok=True)
    (out / "systems").mkdir(exist_ok=True)
    shutil.copytree(HERE / "static", out / "static", dirs_exist_ok=True)
    workloads: dict[str, list] = {}
    for board in boards:
        workloads.setdefault(board.workload, []).append(board)
    (out / "index.html").write_text(
        env.get_template("index.html").render(
            workloads=workloads, systems=sorted(systems.values(), key=lambda s: (s.submitter, s.name)), root=""
        )
    )
    for name, its_boards in workloads.items():
        (out / "workloads" / f"{name}.html").write_text(
            env.get_template("workload.html").render(workload=name, boards=its_boards, root="../")
        )
    for key, info in systems.items():
        results = [(b, row) for b in boards for row in b.rows if row.system.key == key]
        svg = _roofline(points.get(key, []), ceilings.get(key, {}))
        (out / "systems" / f"{key}.html").write_text(
            env.get_template("system.html").render(
                system=info, results=results, roofline=svg, has_ceilings=key in ceilings, root="../"
            )
        )
    return {"workloads": len(workloads), "boards": len(boards), "systems": len(systems), "records": len(run_ids)}
