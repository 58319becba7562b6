"""nccl-tests' own table of a collective's record, as ``perfsuite show`` prints it: size, count,
type, redop, root, then time, algbw, busbw and #wrong out of place and in place, with a
caption naming the timing mode and the sizes where a Python loop could not keep up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    pass

from perfsuite.workloads.collectives._plan import MODE_LABELS, MODES


# -- presentation ------------------------------------------------------------------------
def _fmt_time(us: float) -> str:
    """nccl-tests' precision: 2 decimals below 100 us, 1 below 10 ms, none above."""
    if us >= 10000.0:
        return f"{us:.0f}"
    if us >= 100.0:
        return f"{us:.1f}"
    return f"{us:.2f}"


def render_table(record: dict) -> Any:
    """The nccl-tests table of a collectives record, as a rich Table (None without rows)."""
    d = record.get("details") or {}
    rows = d.get("rows")
    if not rows:
        return None
    from rich.table import Table

    title = (
        f"{d.get('collective')}  world {d.get('world_size')}  backend {d.get('backend')}"
        + (f"  NCCL {d['nccl_version']}" if d.get("nccl_version") else "")
        + f"  timing: {timing_label(d)}"
    )
    t = Table(title=title, caption=_caption(d))
    for name in ("size (B)", "count (elements)", "type", "redop", "root"):
        t.add_column(name, justify="right")
    for mode in MODES:
        for name in ("time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"):
            t.add_column(f"{MODE_LABELS[mode]}\n{name}", justify="right")
    for r in rows:
        cells = [str(r["size_bytes"]), str(r["count"]), r["dtype"], r["redop"], str(r["root"])]
        for mode in MODES:
            m = r.get(mode)
            if m is None:
                cells += ["n/a"] * 4
            else:
                cells += [
                    _fmt_time(m["time_us"]),
                    f"{m['algbw_gbps']:.2f}",
                    f"{m['busbw_gbps']:.2f}",
                    "N/A" if m["wrong"] is None else str(m["wrong"]),
                ]
        t.add_row(*cells)
    return t


def timing_label(d: dict) -> str:
    """How the table's times were taken (records before ``timing`` existed: per call)."""
    how = d.get("timing", "per_call")
    if how == "per_call":
        return "per-call events"
    graph = " (CUDA graph)" if d.get("cuda_graph") else ""
    held = ", queued behind a stream hold" if d.get("hold_s") is not None else ""
    kind = "host loop" if how == "host_loop" else "loop"
    return f"{kind} of {d.get('iters')} calls{graph}{held}, {d.get('repeats')} repeats"


def host_bound(rows: list[dict]) -> tuple[list[int], float | None]:
    """The sizes where issuing a call from Python took longer than the call ran (a loop
    without the hold would measure the host there), and the median host time per call."""
    bound, launches = [], []
    for r in rows:
        for mode in MODES:
            m = r.get(mode)
            if m and m.get("launch_us") is not None:
                launches.append(m["launch_us"])
                if m["launch_us"] > m["time_us"] and r["size_bytes"] not in bound:
                    bound.append(r["size_bytes"])
    launches.sort()
    return bound, (launches[len(launches) // 2] if launches else None)


def _caption(d: dict) -> str:
    lines = []
    if d.get("wrong_total") is not None:
        lines.append(f"Out of bounds values : {d['wrong_total']} {'OK' if d['wrong_total'] == 0 else 'FAILED'}")
    if d.get("avg_busbw_gbps") is not None:
        lines.append(f"Avg bus bandwidth    : {d['avg_busbw_gbps']:.4g} GB/s")
    bound, launch = host_bound(d.get("rows") or [])
    if launch is not None and d.get("hold_s") is not None:
        where = f"host-bound (issuing > running) up to {max(bound)} B" if bound else "never host-bound"
        lines.append(f"Host launch          : {launch:.1f} us per call (median); a Python loop is {where}")
    unheld = sum((r.get(m) or {}).get("unheld_loops", 0) for r in d.get("rows") or [] for m in MODES)
    if unheld:
        lines.append(f"Stream hold          : ran out before the calls were issued in {unheld} loops")
    for label, why in (d.get("modes") or {}).items():
        if why != "measured":
            lines.append(f"{label} {why}")
    return "\n".join(lines)
