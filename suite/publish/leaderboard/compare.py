"""System against system: every benchmark cell two systems share, compared by the rule of
``perfsuite compare`` (``perfsuite.analysis.compare.metric_verdict``: faster or slower only when the
Mann-Whitney test is significant, the ratio's bootstrap CI excludes 1 and the change is
beyond the threshold), with runs as the unit: each side's values are its runs' headline
figures (the latest :data:`MAX_RUNS`), so a side with one run is "not tested".

Every pair is computed when the board has at most :data:`MAX_SYSTEMS` systems; beyond that,
the pairs among the :data:`MAX_SYSTEMS` systems with the most results, and beyond
:data:`MAX_COMPARISONS` cells in all, each benchmark's standard configuration only, among
as many of those systems as keep within it: one bootstrap CI costs 10-30 ms here, and a
public round's every pair in every configuration would need hours.
"""

from __future__ import annotations

from itertools import combinations

from .data import Board, Cell

MAX_SYSTEMS = 12
MAX_RUNS = 10
# Beyond this many cell comparisons (each a bootstrap), only the standard configurations are compared.
MAX_COMPARISONS = 2000


# Pair comparisons are spread over worker processes from this many pairs on.
PARALLEL_PAIRS = 24


def system_pairs(boards: list[Board]) -> list[dict]:
    """Every pair of (chosen) systems with the benchmark cells both have, compared."""
    from perfsuite.registry.bulk import map_chunks

    names = {row.system.key: row.system.name for b in boards for c in b.configs for row in c.rows}
    tasks = _tasks(boards, names, standard_only=False, systems=MAX_SYSTEMS)
    systems = MAX_SYSTEMS
    while sum(len(shared) for _, _, shared in tasks) > MAX_COMPARISONS and systems > 2:
        systems -= 1  # the standard configurations only, among fewer systems
        tasks = _tasks(boards, names, standard_only=True, systems=systems)
    pairs = []
    for _chunk, done in map_chunks(_compare_pairs, tasks, chunk_size=4, parallel_from=PARALLEL_PAIRS):
        pairs.extend(done)
    return pairs


def _tasks(boards: list[Board], names: dict[str, str], standard_only: bool, systems: int) -> list[tuple]:
    """Per pair of systems (the ``systems`` with the most cells), the cells both have."""
    cells: dict[str, dict[tuple, Cell]] = {}
    for board in boards:
        for config in board.configs[:1] if standard_only else board.configs:
            for row in config.rows:
                for case, cell in row.cells.items():
                    cells.setdefault(row.system.key, {})[(board.workload, config.id, config.label, case)] = cell
    chosen = sorted(cells, key=lambda k: (-len(cells[k]), names[k]))[:systems]
    tasks = []
    for a, b in combinations(sorted(chosen, key=lambda k: names[k]), 2):
        shared = []
        for where in sorted(set(cells[a]) & set(cells[b])):
            ca, cb = cells[a][where], cells[b][where]
            shared.append(
                (
                    where,
                    [r.value for r in ca.runs[-MAX_RUNS:]],
                    [r.value for r in cb.runs[-MAX_RUNS:]],
                    ca.higher_is_better,
                    ca.unit,
                    ca.value,
                    cb.value,
                )
            )
        if shared:
            tasks.append(((a, b), (names[a], names[b]), shared))
    return tasks


def _compare_pairs(tasks: list[tuple]) -> list[dict]:
    """A worker's share: each pair's shared cells compared by the rule of ``perfsuite compare``."""
    from perfsuite.analysis.compare import DEFAULT_ALPHA, DEFAULT_THRESHOLD, has_ratio, metric_verdict
    from perfsuite.measure import stats

    out = []
    for keys, pair_names, shared in tasks:
        rows = []
        for where, va, vb, higher_is_better, unit, a_value, b_value in shared:
            if not has_ratio(va):  # e.g. busbw at world size 1, zero by nccl-tests' formula: no ratio
                continue
            ratio, low, high = stats.ratio_of_medians_ci(va, vb)
            p = stats.mann_whitney_u(va, vb)[1] if len(va) > 1 and len(vb) > 1 else None
            verdict = metric_verdict(ratio, low, high, p, higher_is_better, DEFAULT_THRESHOLD, DEFAULT_ALPHA)
            rows.append(
                {
                    "benchmark": where[0],
                    "configuration": where[2],
                    "case": where[3],
                    "unit": unit,
                    "higher_is_better": higher_is_better,
                    "a": a_value,
                    "b": b_value,
                    "ratio": ratio,
                    "ci_low": low,
                    "ci_high": high,
                    "p": p,
                    "runs_a": len(va),
                    "runs_b": len(vb),
                    "verdict": "not tested (one run)" if p is None else verdict,
                }
            )
        out.append({"systems": list(keys), "names": list(pair_names), "rows": rows})
    return out
