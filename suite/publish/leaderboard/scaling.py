"""A training benchmark's scaling view: throughput and scaling efficiency against the number of
GPUs (the world size), per system, from the tables of one board that differ only in their world.

The tables never pool two world sizes (the world is part of the comparability key), so a
scaling series is drawn across tables, and only across tables whose other settings are equal:

- **strong scaling**: every setting equal but the world (the same global batch spread over
  more GPUs);
- **weak scaling**: every setting equal but the world and the global batch, the batch on each
  GPU (global batch over world size) the same.

Each point is one system's throughput in one table: the median over that system's ranked runs
there of the run's ``tokens_per_s`` (else ``samples_per_s``), the first of them that every
charted run reports. A series' efficiency at N GPUs is its throughput over N times its
throughput on its fewest GPUs, per GPU (``T(N) * n0 / (N * T(n0))``): 1 on one GPU, and named
"against n0 GPUs" where the series has no one-GPU point.

Beside it, the bare DDP loop's efficiency by the same formula, from the bare loop the training
cross-check ran in the same call as each run (``details.crosscheck.train.reference_samples_per_s``,
the same model, loss, precision, optimizer and compile setting at the run's world size): scaling
is judged against what a plain loop reaches on the same machine, not against 1.0 alone.

And the suite's efficiency over the bare loop's from the cross-check's rounds, whose two sides
ran back to back: the median of a point's round ratios (suite over bare loop) over the median of
the series' first point's, with a 95% percentile bootstrap interval over both points' rounds
(``perfsuite.measure.stats.ratio_of_medians_ci``). Under a power cap a side's rounds can spread
wider than the few percent between two efficiencies, which a round's ratio mostly leaves out.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from sqlalchemy import select

from perfsuite.registry.models import Metric, Run
from perfsuite.schemas.bare_loop_rounds import round_ratios

from .data import Board, Config

THROUGHPUT = ("tokens_per_s", "samples_per_s")  # the first that every charted run reports
BATCH = "param.global_batch"
CHUNK = 1000


def world_size(config: Config) -> int:
    return int(config.shown.get("world.world_size", "1"))


def _rest(config: Config) -> dict[str, str]:
    return {k: v for k, v in config.shown.items() if not k.startswith("world.")}


def scaling_groups(board: Board) -> list[tuple[str, str, list[Config]]]:
    """(kind, what is held, tables) for each strong or weak scaling group of ``board`` with at
    least two world sizes: kind ``strong`` (held: the global batch, or "same settings") or
    ``weak`` (held: the batch per GPU)."""
    strong: dict[tuple, list[Config]] = defaultdict(list)
    weak: dict[tuple, list[Config]] = defaultdict(list)
    for config in board.configs:
        rest = _rest(config)
        strong[tuple(sorted(rest.items()))].append(config)
        batch = rest.pop(BATCH, None)
        if batch is not None:
            try:
                per_gpu = float(batch) / world_size(config)
            except ValueError:
                continue
            weak[(*sorted(rest.items()), ("per_gpu", per_gpu))].append(config)
    out = []
    for kind, groups in (("strong", strong), ("weak", weak)):
        for key, configs in groups.items():
            if len({world_size(c) for c in configs}) < 2:
                continue
            if kind == "weak":
                held = f"{dict(key)['per_gpu']:g} per GPU"
            else:
                batch = configs[0].shown.get(BATCH)
                held = f"global batch {batch}" if batch is not None else "same settings"
            out.append((kind, held, sorted(configs, key=world_size)))
    return out


def _throughputs(session, run_ids: list[str]) -> dict[str, dict[str, float]]:
    """run id -> metric name -> value, for the throughput metrics (the ``train`` case first)."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for start in range(0, len(run_ids), CHUNK):
        chunk = run_ids[start : start + CHUNK]
        rows = session.execute(
            select(Run.run_id, Metric.case, Metric.name, Metric.value)
            .join(Run, Metric.run_id == Run.id)
            .where(Run.run_id.in_(chunk), Metric.name.in_(THROUGHPUT))
        ).all()
        for run_id, _case, name, value in sorted(rows, key=lambda r: r[1] != "train"):
            out[run_id].setdefault(name, value)
    return out


def _bare_loops(session, run_ids: list[str]) -> dict[str, tuple[float, list[float]]]:
    """run id -> (the bare DDP loop's samples/s that the training cross-check measured beside the
    run, each round's suite samples/s over its bare loop's), where it measured one."""
    out: dict[str, tuple[float, list[float]]] = {}
    for start in range(0, len(run_ids), CHUNK):
        chunk = run_ids[start : start + CHUNK]
        for run_id, crosscheck in session.execute(
            select(Run.run_id, Run.record[("details", "crosscheck")]).where(Run.run_id.in_(chunk))
        ):
            train = crosscheck.get("train") if isinstance(crosscheck, dict) else None
            if not isinstance(train, dict) or train.get("status") != "measured":
                continue
            rate = train.get("reference_samples_per_s")
            if isinstance(rate, (int, float)) and rate > 0:
                out[run_id] = (float(rate), round_ratios(train.get("rounds") or []))
    return out


def _versus_bare(base: list[float], here: list[float]) -> list[float] | None:
    """The suite's efficiency over the bare loop's at a point, from the rounds' ratios there and
    at the series' first point: [median ratio over the first point's, 95% interval low, high]."""
    if not base or not here:
        return None
    from perfsuite.measure.stats import ratio_of_medians_ci

    ratio, low, high = ratio_of_medians_ci(base, here)
    return [ratio, low, high]


def _efficiencies(points: list[tuple[int, float | None]]) -> list[float | None]:
    """Each (world, throughput)'s scaling efficiency against the first point's."""
    base_world, base = points[0]
    return [t * base_world / (w * base) if t is not None and base else None for w, t in points]


def scaling_charts(session, board: Board) -> dict[str, dict]:
    """Per table id, the scaling series it belongs to (strong and weak), as the page's chart data:
    ``{"metric", "unit", "series": [{"label", "system", "kind", "held", "base_world",
    "points": [[world, throughput, efficiency, run count, bare loop efficiency, versus bare],
    ...]}]}`` (the bare loop's efficiency null where a point's runs, or the series' first
    point's, measured no bare loop; versus bare, ``[ratio, low, high]``, the suite's efficiency
    over the bare loop's from the rounds, null at the first point and where either point's runs
    have no rounds). Tables in no group with two world sizes have no entry. Training boards only."""
    if board.category != "training":
        return {}
    groups = scaling_groups(board)
    if not groups:
        return {}
    runs_of: dict[tuple[str, str], list[str]] = {}  # (table id, system) -> its run ids there
    for _, _, configs in groups:
        for config in configs:
            for row in config.rows:
                ids = {rv.run_id for cell in row.cells.values() for rv in cell.runs}
                runs_of[(config.id, row.system.name)] = sorted(ids)
    figures = _throughputs(session, sorted({r for ids in runs_of.values() for r in ids}))
    bare = _bare_loops(session, sorted({r for ids in runs_of.values() for r in ids}))
    reported = [set(figures.get(r, {})) for ids in runs_of.values() for r in ids]
    metric = next((m for m in THROUGHPUT if reported and all(m in names for names in reported)), None)
    if metric is None:
        return {}
    unit = _unit(session, metric, next(iter(runs_of.values()))[0])
    out: dict[str, dict] = {}
    for kind, held, configs in groups:
        series = []
        systems = sorted({row.system.name for c in configs for row in c.rows})
        for system in systems:
            points: list[tuple[int, float, int, float | None]] = []
            rounds: list[list[float]] = []  # per point, its runs' round ratios pooled
            for config in configs:
                found = runs_of.get((config.id, system))
                if found:
                    values = [figures[r][metric] for r in found]
                    loops = [bare[r][0] for r in found if r in bare]
                    loop = statistics.median(loops) if loops else None
                    points.append((world_size(config), statistics.median(values), len(values), loop))
                    rounds.append([x for r in found if r in bare for x in bare[r][1]])
            if len(points) < 2:
                continue
            base_world = points[0][0]
            efficiency = _efficiencies([(w, t) for w, t, _, _ in points])
            bare_efficiency = _efficiencies([(w, b) for w, _, _, b in points])
            versus = [None] + [_versus_bare(rounds[0], here) for here in rounds[1:]]
            series.append(
                {
                    "label": f"{system} · {kind} scaling ({held})",
                    "system": system,
                    "kind": kind,
                    "held": held,
                    "base_world": base_world,
                    "points": [
                        [w, t, e, n, b, v]
                        for (w, t, n, _), e, b, v in zip(points, efficiency, bare_efficiency, versus, strict=True)
                    ],
                }
            )
        for config in configs:
            if series:
                entry = out.setdefault(config.id, {"metric": metric, "unit": unit, "series": []})
                entry["series"].extend(series)
    return out


def leading_series(board: Board, charts: dict[str, dict], systems: int) -> dict[str, dict]:
    """``charts`` with each table's series cut to those of its first ``systems`` rows (its leaders,
    as its other pictures draw)."""
    for config in board.configs:
        chart = charts.get(config.id)
        if chart is not None:
            leaders = {row.system.name for row in config.rows[:systems]}
            chart["series"] = [s for s in chart["series"] if s["system"] in leaders]
    return charts


def _unit(session, metric: str, run_id: str) -> str:
    found = session.execute(
        select(Metric.unit).join(Run, Metric.run_id == Run.id).where(Run.run_id == run_id, Metric.name == metric)
    ).first()
    return found[0] if found else ""
