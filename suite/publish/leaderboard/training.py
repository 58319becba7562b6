"""What a training benchmark's page says about its two kinds of run.

A time-to-target run (``goal=target``, the default) trains until the model reaches its target
accuracy: its time to target is the figure a training benchmark is ranked by, scored as MLPerf
scores it (the olympic mean of a system's runs from three on, else their median). A throughput
run (``goal=throughput``) trains for a budget and reports its rate: it never reached a target,
so it is never ranked against time to target; a set of them at 1, 2, 4 ... GPUs is a scaling
series, drawn in the page's scaling view.

The standard table of a board with time-to-target runs is one of them
(:attr:`~perfsuite.publish.leaderboard.data.Config.throughput_goal`); this module gives the
other views the words and figures that keep the two apart: what each table is (:func:`goal_text`),
the throughput runs' scaling series drawn beside a time-to-target table that has none of its own
(:func:`scaling_beside`), and what the front page's card says (:func:`training_card`).
"""

from __future__ import annotations

from .data import Board, Config
from .scaling import world_size


def ranks_time_to_target(config: Config) -> bool:
    """A table ranked by time to target: a headline ``time_to_target_s``."""
    return any(head.metric == "time_to_target_s" for head in config.heads.values())


def goal_text(board: Board, config: Config) -> str:
    """The sentence a training table's section opens with: what its runs are and how (or whether)
    they rank the benchmark. Empty for a table that is neither kind (and outside training)."""
    if board.category != "training":
        return ""
    if config.throughput_goal:
        ranked = [c for c in board.configs if ranks_time_to_target(c) and not c.throughput_goal]
        where = (
            "this benchmark is ranked by time to target (its standard table)"
            if ranked
            else "this benchmark has no time-to-target run to rank it by yet"
        )
        return (
            f"Throughput runs (goal = throughput) on {_gpus([world_size(config)])}: "
            "each trained for a fixed budget and reports its rate, never reaching a target. They are "
            "points of the scaling view below, compared only with throughput runs of the same settings; "
            f"{where}."
        )
    if ranks_time_to_target(config):
        return (
            "Ranked by time to target, as MLPerf scores it: each system's runs (seeds) to the target "
            "accuracy, the fastest and the slowest dropped and the rest averaged (the olympic mean) from "
            "three runs on, else their median. Throughput runs (goal = throughput) are never ranked here: "
            "they are drawn in the scaling view below."
        )
    return ""


def scaling_beside(board: Board, charts: dict[str, dict]) -> dict[str, dict]:
    """``charts`` (a board's scaling series by table id, as the page draws them) with, for each
    time-to-target table that has no series of its own, the series of the board's throughput
    runs of their latest version, named as such in ``from`` (the page says where they come from):
    a training page shows its scaling beside its ranking, never ranked against it."""
    if board.category != "training":
        return charts
    sources = [c for c in board.configs if c.throughput_goal and c.id in charts]
    if not sources:
        return charts
    version = max(c.version for c in sources)
    sources = [c for c in sources if c.version == version]
    worlds = sorted({world_size(c) for c in sources})
    series: dict[str, dict] = {}
    for config in sources:
        for s in charts[config.id]["series"]:
            series.setdefault(s["label"], s)
    first = charts[sources[0].id]
    beside = {
        "metric": first["metric"],
        "unit": first["unit"],
        "series": list(series.values()),
        "from": f"the throughput runs (goal = throughput) of version {version} at {_gpus(worlds)}",
    }
    out = dict(charts)
    for config in board.configs:
        if config.id not in out and not config.throughput_goal and ranks_time_to_target(config):
            out[config.id] = beside
    return out


def training_card(board: Board) -> dict:
    """What a training benchmark's front-page card adds: whether its standard table is one of
    throughput runs (a board with no time-to-target run: the card says nothing ranks it yet) and
    the GPU counts of its throughput runs (the card links them, apart, to the scaling view)."""
    return {
        "throughput_goal": board.default.throughput_goal,
        "scaling_worlds": sorted({world_size(c) for c in board.configs if c.throughput_goal}),
    }


def _gpus(worlds: list[int]) -> str:
    """``1, 2 and 4 GPUs``."""
    names = [str(w) for w in worlds]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{listed} GPU{'s' if worlds != [1] else ''}"
