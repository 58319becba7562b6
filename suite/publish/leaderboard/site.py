"""Writing the leaderboard site: pages from Jinja2 templates (autoescaped), each benchmark's
data (its tables, filters, pictures and trends) as JSON in a file of its own,
``data/<benchmark>.js``, that its page loads (a script file, since a page opened from files
may not fetch() one; the content security policy of every page allows scripts from the site's
own files only), the vendored table and chart libraries, and the downloads (the board as JSONL,
CSV and Parquet).

Sized for a public round (100,000 records, 50 systems): the pages are one per benchmark and
one per system, the front page's cards show each benchmark's leaders and link to the rest,
the pictures draw the leaders of the table shown (:data:`CHART_SYSTEMS`; the table ranks
every system), and a record's page exists for the records the site links to (each table
cell's latest run); ``per_run`` writes every ranked record's page as well.

The site is built into a temporary sibling folder and moved in only when complete
(:func:`perfsuite.owned_output.publish_folder`): a failed build leaves the previous
site as it was. The folder's manifest lists the files perfsuite wrote: a rebuild replaces and
removes only those, so no file of an older build survives a new one and a file the user put
in the folder is never touched; a folder without a manifest that is not empty is refused.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections import defaultdict
from pathlib import Path

from sqlalchemy import select

from perfsuite.analysis.tables import size_text
from perfsuite.owned_output import publish_folder
from perfsuite.registry.models import Metric, Run, Submission
from perfsuite.schemas.serving_steady import no_steady_state

from .compare import system_pairs
from .data import Board, Cell, Config, SystemInfo, load, setting_name
from .scaling import leading_series, scaling_charts
from .training import goal_text, ranks_time_to_target, scaling_beside, training_card
from .trend import trend_series

HERE = Path(__file__).resolve().parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'none'; base-uri 'none'; form-action 'none'"
)
CHUNK = 1000
# The systems a picture draws: the leaders of the table shown. Fifty curves, or fifty columns
# of dots, are no picture (and fifty legend entries overflow a phone); the table ranks them all.
CHART_SYSTEMS = 8
# The systems a front-page card lists: the leaders, then a link to the benchmark's page.
FRONT_LEADERS = 5


def _json_script(data) -> str:
    """JSON that is safe inside a <script type="application/json"> element: '<', '>' and '&'
    are escaped, so no submitted string can close the element."""
    return _escape_json_text(json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str))


def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
    from markupsafe import Markup

    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = num
    env.filters["pct"] = lambda v: "" if v is None else f"{v * 100:.1f}%"
    env.filters["json_script"] = lambda data: Markup(_json_script(data))
    env.filters["note"] = cell_note
    env.filters["setting"] = setting_name
    env.globals["csp"] = CSP
    return env


def num(value: float | None) -> str:
    """Four significant digits, thousands separated: 773.4, 4,240, 0.02113."""
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:,.4g}"


def cell_json(config: Config) -> list[dict]:
    """A configuration's rows as the table's data: one object per system."""
    out = []
    for rank, row in enumerate(config.rows, start=1):
        s = row.system
        item = {
            "rank": rank,
            "system": s.name,
            "system_key": s.key,
            "submitter": s.submitter or "(not submitted)",
            "accelerator": f"{s.accelerator_count} x {s.accelerator}",
            "software": s.software,
        }
        for case in config.cases:
            c = row.cells.get(case)
            if c is None:
                continue
            item[f"c:{case}"] = c.value
            item[f"t:{case}"] = f"{num(c.value)} {c.unit}"
            item[f"n:{case}"] = cell_note(c)
            item[f"r:{case}"] = c.latest.run_id
        out.append(item)
    return out


def cell_note(cell: Cell) -> str:
    """What a cell says beside its figure: how it was scored, its interval, LoadGen's verdict,
    the figures its headline shows beside (TTFT, TPOT, a stall share), its cost."""
    validity = {True: "VALID", False: "INVALID"}.get(cell.valid) if cell.valid is not None else None
    beside = ", ".join(f"{b['metric']} {num(b['value'])} {b['unit']}" for b in cell.beside)
    return "; ".join(x for x in (cell.note, _ci(cell), validity, beside, cell.cost or "") if x)


def _ci(cell) -> str:
    return f"{num(cell.ci_low)}–{num(cell.ci_high)}" if cell.ci_low is not None else ""


def _columns(config: Config) -> list[dict]:
    return [
        {
            "case": case,
            "unit": config.heads[case].unit,
            "higher_is_better": config.heads[case].higher_is_better,
            "metric": config.heads[case].metric,
        }
        for case in config.cases
    ]


def board_rows(boards: list[Board]) -> list[dict]:
    """The whole board, one row per cell (benchmark, configuration, system, case): the downloads."""
    out = []
    for board in boards:
        for config in board.configs:
            for row in config.rows:
                s = row.system
                for case, c in row.cells.items():
                    out.append(
                        {
                            "benchmark": board.workload,
                            "category": board.category,
                            "configuration": config.label,
                            "comparability_key": config.key,
                            "settings": json.dumps(config.settings, sort_keys=True, default=str),
                            "default_configuration": config.default,
                            "submitter": s.submitter,
                            "system": s.name,
                            "accelerator": s.accelerator,
                            "accelerator_count": s.accelerator_count,
                            "software": s.software,
                            "availability": s.availability,
                            "case": case,
                            "metric": c.metric,
                            "value": c.value,
                            "unit": c.unit,
                            "higher_is_better": c.higher_is_better,
                            "ci_low": c.ci_low,
                            "ci_high": c.ci_high,
                            "runs": c.count,
                            "score": c.note,
                            "regime": c.regime,
                            "valid": c.valid,
                            "ceiling_fraction": c.fraction,
                            "cost": c.cost,
                            "latest_run_id": c.latest.run_id,
                            "latest_started_at": c.latest.started_at.isoformat(),
                        }
                    )
    return out


def _write_downloads(rows: list[dict], out: Path) -> list[str]:
    """The board as JSONL, CSV and (with perfsuite[parquet]) Parquet; the names written, which are
    the only ones the front page links: a link to a file that was not written is a 404."""
    with open(out / "board.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
    with open(out / "board.csv", "w", encoding="utf-8", newline="") as f:
        if rows:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    written = ["board.jsonl", "board.csv"]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return written  # the Parquet download needs perfsuite[parquet]; the page says so when it is absent
    pq.write_table(pa.Table.from_pylist(rows), out / "board.parquet")
    return [*written, "board.parquet"]


def _family_charts(session, board: Board) -> dict:
    """Per configuration, the family's picture: busbw against message size (collectives), latency
    against throughput per scenario (inference), time to target (training)."""
    out: dict[str, dict] = {}
    if board.category not in ("collectives", "inference", "training"):
        return out
    if board.category == "collectives":
        return _busbw_charts(session, board)
    for config in board.configs:
        latest = _latest_runs(config)
        if board.category == "inference":
            curves, per_gpu = _serving_curves(session, latest)
            if curves or per_gpu:
                out[config.id] = {"kind": "serving", "series": curves, "per_gpu": per_gpu}
                continue
            series: dict[str, list] = {}
            pk_of = dict(session.execute(select(Run.run_id, Run.id).where(Run.run_id.in_(list(latest.values())))).all())
            metrics: dict[tuple, dict] = defaultdict(dict)
            for run_pk, case, name, value in session.execute(
                select(Metric.run_id, Metric.case, Metric.name, Metric.value).where(
                    Metric.run_id.in_(list(pk_of.values()))
                )
            ):
                metrics[(run_pk, case)][name] = value
            for system, rid in latest.items():
                pts = []
                for case in config.cases:
                    m = metrics.get((pk_of.get(rid), case), {})
                    x = next(
                        (
                            m[k]
                            for k in (
                                "completed_samples_per_s",
                                "samples_per_s",
                                "qps_with_overhead",
                                "qps_without_overhead",
                            )
                            if k in m
                        ),
                        None,
                    )
                    y = next((m[k] for k in ("latency_p90_ms", "latency_p99_ms", "latency_p50_ms") if k in m), None)
                    if x and y:
                        pts.append([x, y, case])
                if pts:
                    series[system] = pts
            if series:
                out[config.id] = {"kind": "latency", "series": series}
        elif ranks_time_to_target(config):
            # a table of throughput-goal runs has no time to target: the scaling view draws its figures
            out[config.id] = {"kind": "time_to_target", "series": _seed_points(config)}
    return out


def _score_label(cell) -> str:
    return "olympic mean" if "olympic" in cell.note else ("median" if cell.count > 1 else "the run")


def _seed_points(config: Config) -> dict[str, dict[str, dict]]:
    """Per system (the table's leaders) and case, each run's time to target (each seed a point:
    the spread is the point of MLPerf's five runs) and the figure the table ranks (the olympic
    mean from 3 runs, else their median), named by how it was made."""
    return {
        row.system.name: {
            case: {
                "runs": [r.value for r in cell.runs],
                "score": cell.value,
                "score_label": _score_label(cell),
            }
            for case, cell in row.cells.items()
        }
        for row in config.rows[:CHART_SYSTEMS]
    }


def _latest_runs(config: Config) -> dict[str, str]:
    """Each leading system's newest run in a table (the first :data:`CHART_SYSTEMS` rows, in
    rank order): system name -> run id."""
    return {
        row.system.name: max((c.latest for c in row.cells.values()), key=lambda r: r.started_at).run_id
        for row in config.rows[:CHART_SYSTEMS]
    }


# The settings that choose which message sizes a sweep measures, never what one size measures:
# two sweeps that differ in them share the sizes they both drew.
SWEEP_RANGE = ("param.min_bytes", "param.max_bytes", "param.step_factor")


def _sweep_range(config: Config) -> str:
    """A table's sizes as people say them: ``16 B–1 GiB ×4``."""
    low, high, step = (config.shown.get(k) for k in SWEEP_RANGE)
    if low is None or high is None:
        return ""
    try:
        span = f"{size_text(int(low))}–{size_text(int(high))}"
    except ValueError:
        return ""
    return f"{span} ×{step}" if step is not None else span


def _busbw_charts(session, board: Board) -> dict:
    """Per table, busbw against message size of each system's newest run (nccl-tests' in-place
    column, else out-of-place), with the curves of the tables whose settings differ only in the
    world size (and the range of sizes swept, :data:`SWEEP_RANGE`) drawn beside, dashed and named
    by their ranks, and by their range where it is not the table's: busbw is nccl-tests' figure
    that compares across rank counts, while the tables never rank them together. Of a world
    size's several such tables, the one that drew the most sizes is drawn."""
    latest = {c.id: _latest_runs(c) for c in board.configs}
    run_ids = sorted({rid for runs in latest.values() for rid in runs.values()})
    curves: dict[str, list] = {}
    for chunk in _chunks(run_ids):
        for rid, rows in session.execute(
            select(Run.run_id, Run.record[("details", "rows")]).where(Run.run_id.in_(chunk))
        ):
            points = []
            for r in rows or []:
                side = r.get("ip") or r.get("oop") or {}
                if side.get("busbw_gbps") and r.get("size_bytes"):
                    points.append([r["size_bytes"], side["busbw_gbps"]])
            if points:
                curves[rid] = points

    def rest(config: Config) -> dict:
        return {k: v for k, v in config.shown.items() if not k.startswith("world.") and k not in SWEEP_RANGE}

    def world(config: Config) -> str:
        return config.shown.get("world.world_size", "1")

    def drawn(config: Config) -> int:
        return max((len(curves.get(rid, [])) for rid in latest[config.id].values()), default=0)

    out = {}
    for config in board.configs:
        by_world: dict[str, Config] = {}
        for c in board.configs:
            if c is config or world(c) == world(config) or rest(c) != rest(config):
                continue
            if world(c) not in by_world or drawn(c) > drawn(by_world[world(c)]):
                by_world[world(c)] = c
        siblings = list(by_world.values())
        series, others = {}, []
        for c in [config, *siblings]:
            sizes = _sweep_range(c) if _sweep_range(c) != _sweep_range(config) else ""
            for system, rid in latest[c.id].items():
                if rid not in curves:
                    continue
                label = f"{system} ({world(c)} ranks{', ' + sizes if sizes else ''})" if siblings else system
                series[label] = curves[rid]
                if c is not config:
                    others.append(label)
        if series:
            out[config.id] = {"kind": "busbw", "series": series, "beside": others}
    return out


# The suffix of a serving series of steps whose throughput is not a steady-state figure (their
# arrivals lasted less than twice their requests): drawn apart, as points, never joined to the line
# of the steps that measured one; the page's script draws a series so named that way.
UNSTEADY = " · no steady state"
# The suffix of the steady-state steps of a system's per-GPU series that its frontier leaves out
# (another step is as good on both figures and better on one): drawn as points, never joined,
# so that the line is InferenceMAX's Pareto frontier and no measured step leaves the picture.
BELOW_FRONTIER = " · below the frontier"


def _serving_curves(session, latest: dict[str, str]) -> tuple[dict[str, list], dict[str, list]]:
    """TTFT and TPOT (p99) against the throughput each step achieved (output tokens/s), per
    system, from the latest run's rate sweep (``inference.serving``'s
    ``details.serving.rate_sweep.steps``), and the SLOs on both as level lines over the
    throughputs drawn (``SLO TTFT``, ``SLO TPOT``; one table shares its SLOs, which are
    parameters of its key). Achieved, not offered: past saturation a higher offered rate buys no
    more tokens, only latency, and the curve bends back where the offered rate would hide it. A
    sweep's own rates are drawn; the steps of its peak search only where the sweep has no rates
    of its own.

    Beside them, InferenceMAX's view (``per_gpu``): output tokens/s per GPU against output
    tokens/s per user (``serving.curve``), per system and engine, from every step of the rate and
    concurrency sweeps that records both (records made before the curve was kept have none). The
    line is the steps' Pareto frontier (:func:`_pareto_frontier`), as InferenceMAX draws it: below
    saturation the per-user figure barely moves, and a line through every step in order of it
    zigzags. The steps it leaves out are drawn as points of a series named with
    :data:`BELOW_FRONTIER`.

    A step whose throughput is not a steady-state figure (``serving_steady``: a rate step whose
    arrivals lasted less than twice its requests, as the 5 s steps filed before the window was
    measured did) is drawn, never dropped or rewritten, in a series of its own named with
    :data:`UNSTEADY`, apart from its system's line."""
    curves: dict[str, list] = {}
    per_gpu: dict[str, list] = {}
    slos: dict[str, float] = {}
    for chunk in _chunks(list(latest.items())):
        serving = dict(
            session.execute(
                select(Run.run_id, Run.record[("details", "serving")]).where(Run.run_id.in_([r for _, r in chunk]))
            ).all()
        )
        for system, rid in chunk:
            details = serving.get(rid) or {}
            by_rate = {step["load"]: step for step in _sweep_steps(details, "rate_sweep") if step.get("load")}
            for label, key in (("TTFT p99", "ttft_ms"), ("TPOT p99", "tpot_ms")):
                for steady, suffix in ((True, ""), (False, UNSTEADY)):
                    points = sorted(
                        [step["output_tokens_per_s"], step[key]["p99"]]
                        for step in by_rate.values()
                        if isinstance(step.get(key), dict)
                        and step[key].get("p99")
                        and step.get("output_tokens_per_s")
                        and (no_steady_state(step) is None) == steady
                    )
                    if points:
                        curves[f"{system} {label}{suffix}"] = points
            engine = ((details.get("endpoint") or {}).get("engine") or {}).get("name")
            frontier, below = _pareto_frontier(_per_gpu_line(details, steady=True))
            unsteady = _per_gpu_line(details, steady=False)
            for suffix, points in (("", frontier), (BELOW_FRONTIER, below), (UNSTEADY, unsteady)):
                if points:
                    per_gpu[(f"{system} {engine}" if engine else system) + suffix] = points
            if by_rate:
                for label, key in (("SLO TTFT", "ttft_ms"), ("SLO TPOT", "tpot_ms")):
                    if (details.get("slo") or {}).get(key):
                        slos[label] = float(details["slo"][key])
    throughputs = sorted({point[0] for points in curves.values() for point in points})
    if throughputs:
        for label, bound in slos.items():
            curves[label] = [[throughputs[0], bound], [throughputs[-1], bound]]
    return curves, per_gpu


def _sweep_steps(details: dict, key: str) -> list[dict]:
    """A sweep's own steps (its rates or concurrencies), else, where it has none, the steps of its
    peak search: a peak search retries loads the sweep already drew, and a line through both runs
    back and forth between two measurements of one load."""
    steps = (details.get(key) or {}).get("steps") or []
    own = [step for step in steps if not str(step.get("case", "")).startswith("find_peak")]
    return own or steps


def _per_gpu_line(details: dict, steady: bool = True) -> list:
    """[tokens/s per user, tokens/s per GPU] of a record's sweep steps (as :func:`_sweep_steps`
    picks them), by tokens/s per user: those whose throughput is a steady-state figure, or
    (``steady`` false) those that are not (``perfsuite.schemas.serving_steady``)."""
    steps = [step for key in ("rate_sweep", "concurrency_sweep") for step in _sweep_steps(details, key)]
    points = []
    for step in steps:
        if (no_steady_state(step) is None) != steady:
            continue
        point = step.get("curve") or {}
        user, gpu = point.get("output_tokens_per_s_per_user"), point.get("output_tokens_per_s_per_gpu")
        if isinstance(user, (int, float)) and isinstance(gpu, (int, float)) and user > 0 and gpu > 0:
            points.append([float(user), float(gpu)])
    return sorted(points)


def _pareto_frontier(points: list) -> tuple[list, list]:
    """``points`` ([tokens/s per user, tokens/s per GPU]) split into their Pareto frontier and the
    rest, each in the order given. A point is on the frontier when no other point is at least as
    good on both figures and better on one: joined in order of tokens/s per user, the frontier's
    tokens/s per GPU only falls. Quadratic, and a sweep has tens of steps."""

    def beaten(p: list) -> bool:
        return any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in points)

    frontier: list = []
    below: list = []
    for p in points:  # each point judged once
        (below if beaten(p) else frontier).append(p)
    return frontier, below


def _chunks(items: list) -> list[list]:
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]


def _rooflines(session, boards: list[Board], systems: dict[str, SystemInfo]) -> dict[str, dict]:
    """Each system's kernel results on its measured roofline, computed by the one roofline
    definition the CLI uses (``perfsuite roofline``): its latest ``kernels.ceilings`` run and the
    latest run of each kernel configuration."""
    from perfsuite.analysis.roofline_report import report
    from perfsuite.measure.roofline import CEILINGS_WORKLOAD

    latest: dict[str, dict[str, str]] = defaultdict(dict)  # system -> config -> run id
    labels: dict[str, str] = {}  # run id -> its table's settings, so that each point says which GEMM it is
    ceilings: dict[str, tuple] = {}
    for board in boards:
        if board.category != "kernels":
            continue
        for config in board.configs:
            for row in config.rows:
                newest = max((c.latest for c in row.cells.values()), key=lambda r: r.started_at)
                if board.workload == CEILINGS_WORKLOAD:
                    held = ceilings.get(row.system.key)
                    if held is None or held[0] < newest.started_at:
                        ceilings[row.system.key] = (newest.started_at, newest.run_id)
                else:
                    latest[row.system.key][f"{board.workload}|{config.id}"] = newest.run_id
                    labels[newest.run_id] = config.label
    out = {}
    for key, (_, ceiling_id) in ceilings.items():
        ids = [ceiling_id, *latest.get(key, {}).values()]
        records = dict(session.execute(select(Run.run_id, Run.record).where(Run.run_id.in_(ids))).all())
        data = report([records[i] for i in ids[1:] if i in records], records[ceiling_id])
        for point in data["points"]:
            point["configuration"] = labels.get(point["run_id"], "")
        out[key] = data
    return out


def _mllogs(session, run_ids: list[str], submissions: Path | None) -> dict[str, Path]:
    """Record files' MLLOG twins in the submissions tree the records were imported from."""
    if submissions is None:
        return {}
    found = {}
    for chunk in _chunks(run_ids):
        for run_id, rel in session.execute(
            select(Run.run_id, Submission.path)
            .join(Submission, Submission.run_id == Run.id)
            .where(Run.run_id.in_(chunk))
        ):
            mllog = (Path(submissions) / rel).with_suffix(".mllog")
            if mllog.is_file():
                found[run_id] = mllog
    return found


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def front_card(board: Board) -> dict:
    """A benchmark on the front page: its standard table's lead case, the leaders' figures there
    (:data:`FRONT_LEADERS`; the card links to the benchmark's page for the rest), and the
    systems that ran it only under other settings (never ranked against these)."""
    config = board.default
    lead = max(config.cases, key=lambda c: sum(c in r.cells for r in config.rows))
    best = [
        {
            "system": r.system.name,
            "system_key": r.system.key,
            "accelerator": f"{r.system.accelerator_count} x {r.system.accelerator}",
            "value": r.cells[lead].value,
            "text": f"{num(r.cells[lead].value)} {r.cells[lead].unit}",
        }
        for r in sorted((r for r in config.rows if lead in r.cells), key=lambda r: _rank_of(r, lead))
    ]
    ranked = {r.system.key for r in config.rows}
    elsewhere: dict[str, dict] = {}
    for other in board.configs[1:]:
        for r in other.rows:
            if r.system.key not in ranked:
                elsewhere.setdefault(r.system.key, {"system": r.system.name, "system_key": r.system.key})
    return {
        "workload": board.workload,
        "category": board.category,
        "case": lead,
        "metric": config.heads[lead].metric,
        "regime": config.regime,
        "configuration": _short_label(config),
        "configurations": len(board.configs),
        "best": best[:FRONT_LEADERS],
        "ranked": len(best),
        "elsewhere": sorted(elsewhere.values(), key=lambda s: s["system"])[:FRONT_LEADERS],
        "elsewhere_count": len(elsewhere),
    }


def _rank_of(row, case: str) -> tuple:
    """A row's place by one case's figure (best first): the lead case need not be the one the
    table is sorted by."""
    cell = row.cells[case]
    return (-cell.value if cell.higher_is_better else cell.value, row.system.name)


def _short_label(config: Config) -> str:
    """A table in a few words (the front page's cards): its version and, past one process, its
    world; a collective of one rank says that it measures no interconnect."""
    world = config.shown.get("world.world_size", "1")
    nodes = config.shown.get("world.nnodes", "1")
    return (
        f"v{config.version}"
        + (f" · {world} ranks" if world != "1" else "")
        + (f" on {nodes} nodes" if nodes != "1" else "")
        + (" · 1 rank: no interconnect measured" if config.one_rank_collective else "")
    )


def facets(board: Board) -> list[dict]:
    """The settings that tell a board's tables apart, each with the values its tables have: the
    board's filters (a table has "—" for a setting it lacks)."""
    names = list(dict.fromkeys(k for c in board.configs for k in c.shown))
    out = []
    for name in names:
        values = {c.shown.get(name, "—") for c in board.configs}
        if len(values) > 1:
            out.append({"name": name, "label": setting_name(name), "options": sorted(values, key=_natural)})
    return out


def _natural(text: str) -> tuple:
    """Numbers in numeric order (2 before 16), then text."""
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def board_data(session, board: Board) -> dict:
    """A benchmark page's data (its tables, filters, pictures and trends), as the page's JSON."""
    return {
        "workload": board.workload,
        "category": board.category,
        "facets": facets(board),
        "configs": [
            {
                "id": c.id,
                "key": c.key,
                "label": c.label,
                "default": c.default,
                "shown": c.shown,
                "regime": c.regime,
                "runs": c.runs,
                "throughput_goal": c.throughput_goal,
                "columns": _columns(c),
                "rows": cell_json(c),
            }
            for c in board.configs
        ],
        "chart_systems": CHART_SYSTEMS,
        "charts": _family_charts(session, board),
        "scaling": scaling_beside(board, leading_series(board, scaling_charts(session, board), CHART_SYSTEMS)),
        "trends": {c.id: trend_series(c, CHART_SYSTEMS) for c in board.configs},
    }


def board_script(data: dict) -> str:
    """A benchmark's data as the script its page loads: JSON assigned to a global (JSON is a
    JavaScript expression; '<', '>' and '&' escaped as in the pages)."""
    return "window.PERFSUITE_BOARD = " + _json_script(data) + ";\n"


def build_site(
    registry, out: Path, submissions: Path | None = None, parents: bool = False, per_run: bool = False
) -> dict[str, int]:
    """Write the site into ``out`` (see the module docstring). Returns counts.

    ``submissions``: the tree the records were imported from, for each record's MLLOG file.
    ``parents``: create missing folders above ``out``. ``per_run``: a page for every ranked
    record, not only for those the site links to (a public round's 100,000 records are some
    850 MB). A folder perfsuite does not own (see :mod:`perfsuite.owned_output`) is refused
    with an ``OutputRefused``."""
    return publish_folder(
        Path(out),
        lambda staging: _build(registry, staging, submissions, per_run),
        command="leaderboard",
        what="the site",
        parents=parents,
    )


def _build(registry, out: Path, submissions: Path | None, per_run: bool = False) -> dict[str, int]:
    env = _environment()
    for folder in ("workloads", "systems", "records", "data"):
        (out / folder).mkdir()
    shutil.copytree(HERE / "static", out / "static")
    with registry.session() as session:
        boards, systems = load(session)
        rows = board_rows(boards)
        downloads = _write_downloads(rows, out)
        system_list = sorted(systems.values(), key=lambda s: (s.submitter, s.name))
        front = [front_card(board) | training_card(board) for board in boards]
        _write(
            out / "index.html",
            env.get_template("index.html").render(
                root="", boards=front, systems=system_list, board_count=len(boards), downloads=downloads
            ),
        )
        for board in boards:
            data = board_data(session, board)
            _write(out / "data" / f"{board.workload}.js", board_script(data))
            _write(
                out / "workloads" / f"{board.workload}.html",
                env.get_template("workload.html").render(
                    root="../",
                    board=board,
                    facets=data["facets"],
                    columns={c.id: _columns(c) for c in board.configs},
                    goals={c.id: goal_text(board, c) for c in board.configs},
                    chart_systems=CHART_SYSTEMS,
                ),
            )
        rooflines = _rooflines(session, boards, systems)
        for info in system_list:
            results = [(b, c, row) for b in boards for c in b.configs for row in c.rows if row.system.key == info.key]
            _write(
                out / "systems" / f"{info.key}.html",
                env.get_template("system.html").render(
                    root="../", system=info, results=results, roofline=rooflines.get(info.key)
                ),
            )
        pairs = system_pairs(boards)
        _write(
            out / "compare.html",
            env.get_template("compare.html").render(
                root="", systems=[s for s in system_list if any(s.key in p["systems"] for p in pairs)], pairs=pairs
            ),
        )
        cells = [cell for b in boards for c in b.configs for r in c.rows for cell in r.cells.values()]
        ranked = {rv.run_id for cell in cells for rv in cell.runs}
        if per_run:
            run_ids = sorted(ranked)
        else:  # the records a page links to: each cell's latest run, and each roofline's runs
            linked = {cell.latest.run_id for cell in cells}
            for roof in rooflines.values():
                linked.add(roof["ceilings_run_id"])
                linked.update(p["run_id"] for p in roof["points"])
            run_ids = sorted(linked)
        _write_records(session, env, out, run_ids, _mllogs(session, run_ids, submissions))
    return {
        "workloads": len(boards),
        "boards": sum(len(b.configs) for b in boards),
        "systems": len(systems),
        "records": len(ranked),  # the ranked records the boards are made of
        "record_pages": len(run_ids),
    }


# A record's page loads the shard its run id falls in: about this many records, so that a public
# round of 100,000 records is some 4,000 files, not 100,000, and a page loads ~150 KB.
RECORDS_PER_SHARD = 32


def shard_count(records: int) -> int:
    """The number of record shards: a power of two giving at most :data:`RECORDS_PER_SHARD` a shard on average."""
    shards = 1
    while shards * RECORDS_PER_SHARD < records:
        shards *= 2
    return shards


def record_shard(run_id: str, shards: int) -> int:
    """The shard of a run id: FNV-1a (32-bit) of its characters modulo ``shards``; the record
    page computes the same in the browser (run ids are hex: one byte a character)."""
    h = 0x811C9DC5
    for ch in run_id:
        h = ((h ^ ord(ch)) * 0x01000193) & 0xFFFFFFFF
    return h % shards


def _write_records(session, env, out: Path, run_ids: list[str], mllogs: dict[str, Path]) -> None:
    """One page for every record (``record.html#RUN_ID``, the permalink) and the records' data
    as script files, ``records/shard-N.js``, each holding the stored text of the records whose
    run ids fall in it (:func:`record_shard`) as is: a public round of 100,000 records is written
    without parsing or rendering one of them here, without a second copy (the page offers the
    record's JSON for download), and as a few thousand files. Shards are written one at a time,
    in shard order, so that the build holds one chunk of records in memory, not the round."""
    from sqlalchemy import Text, cast

    shards = shard_count(len(run_ids))
    (out / "record.html").write_text(env.get_template("record.html").render(root="", shards=shards), encoding="utf-8")
    folder = out / "records"
    for run_id, mllog in mllogs.items():
        shutil.copyfile(mllog, folder / f"{run_id}.mllog")
    by_shard = sorted(run_ids, key=lambda r: (record_shard(r, shards), r))
    pending: dict[int, list[str]] = defaultdict(list)
    written = -1

    def flush(upto: int) -> None:
        for shard in sorted(k for k in pending if k <= upto):
            parts = pending.pop(shard)
            (folder / f"shard-{shard}.js").write_text(
                "window.PERFSUITE_SHARD = {\n" + ",\n".join(parts) + "\n};\n", encoding="utf-8"
            )

    for chunk in _chunks(by_shard):
        texts = dict(session.execute(select(Run.run_id, cast(Run.record, Text)).where(Run.run_id.in_(chunk))).all())
        for run_id in chunk:
            has_mllog = "true" if run_id in mllogs else "false"
            pending[record_shard(run_id, shards)].append(
                f'"{run_id}": {{"mllog": {has_mllog}, "record": {texts[run_id]}}}'
            )
        written = record_shard(chunk[-1], shards) - 1  # the last shard may continue in the next chunk
        flush(written)
    flush(shards)


def _escape_json_text(text: str) -> str:
    """JSON text made safe inside <script type="application/json">: '<', '>' and '&' only occur
    inside its strings, where their \\u escapes mean the same characters."""
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def csv_text(rows: list[dict]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()
