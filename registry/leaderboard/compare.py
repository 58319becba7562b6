"""System against system: every benchmark cell two systems share, compared by the rule of
``perfsuite compare`` (``perfsuite.analysis.compare.metric_verdict``: faster or slower only when the
Mann-Whitney test is significant, the ratio's bootstrap CI excludes 1 and the change is
beyond the threshold), with runs as the unit: each side's values are its runs' headline
figures (the latest :data:`MAX_RUNS`), so a side with one run is "not tested".

Every pair is computed when the board has at most :data:`MAX_SYSTEMS` systems; beyond that,
the pairs among the :data:`MAX_SYSTEMS` systems with the most results (a public round's
picker would otherwise need hundreds of thousands of bootstraps).
"""

from __future__ import annotations

from itertools import combinations

from .data import Board, Cell

MAX_SYSTEMS = 16
MAX_RUNS = 20


def system_pairs(boards: list[Board]) -> list[dict]:
    from perfsuite.analysis.compare import DEFAULT_ALPHA, DEFAULT_THRESHOLD, metric_verdict
    from perfsuite.measure import stats

    cells: dict[str, dict[tuple, Cell]] = {}
    names: dict[str, str] = {}
    for board in boards:
        for config in board.configs:
            for row in config.rows:
                names[row.system.key] = row.system.name
                for case, cell in row.cells.items():
                    cells.setdefault(row.system.key, {})[(board.workload, config.id, config.label, case)] = cell
    chosen = sorted(cells, key=lambda k: (-len(cells[k]), names[k]))[:MAX_SYSTEMS]
    pairs = []
    for a, b in combinations(sorted(chosen, key=lambda k: names[k]), 2):
        rows = []
        for where in sorted(set(cells[a]) & set(cells[b])):
            ca, cb = cells[a][where], cells[b][where]
            va = [r.value for r in ca.runs[-MAX_RUNS:]]
            vb = [r.value for r in cb.runs[-MAX_RUNS:]]
            ratio, low, high = stats.ratio_of_medians_ci(va, vb)
            p = stats.mann_whitney_u(va, vb)[1] if len(va) > 1 and len(vb) > 1 else None
            verdict = metric_verdict(ratio, low, high, p, ca.higher_is_better, DEFAULT_THRESHOLD, DEFAULT_ALPHA)
            rows.append(
                {
                    "benchmark": where[0],
                    "configuration": where[2],
                    "case": where[3],
                    "unit": ca.unit,
                    "higher_is_better": ca.higher_is_better,
                    "a": ca.value,
                    "b": cb.value,
                    "ratio": ratio,
                    "ci_low": low,
                    "ci_high": high,
                    "p": p,
                    "runs_a": len(va),
                    "runs_b": len(vb),
                    "verdict": "not tested (one run)" if p is None else verdict,
                }
            )
        if rows:
            pairs.append({"systems": [a, b], "names": [names[a], names[b]], "rows": rows})
    return pairs
