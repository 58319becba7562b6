"""``perfsuite history --plot``: each series is labelled by the settings that set it apart from
the others on the plot (``m=128`` against ``m=256``), never by its key's hash; what the series
share is written once above the plot. The legend is read back from the SVG the real CLI wrote
(its text kept as text), on runs stored in a real registry."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import timedelta

from support.factories import DEFAULT_START, gemm_metrics, make_record

from perfsuite.analysis.history_plot import series_labels
from perfsuite.registry import open_registry

SVG = "{http://www.w3.org/2000/svg}"


def store_runs(db: str, m: int, start_day: int, **controls) -> list[dict]:
    """Three runs of kernels.gemm at M=m, a day apart."""
    records = [
        make_record(
            params={"m": m, "n": 1024, "k": 1024, "dtype": "bf16"},
            started_at=DEFAULT_START + timedelta(days=start_day + i),
            metrics=gemm_metrics(time_ms=tuple(t * (1 + i / 100) for t in (1.02, 1.00, 1.01, 1.05, 0.99))),
            **({"controls": controls} if controls else {}),
        )
        for i in range(3)
    ]
    with open_registry(db) as reg:
        for record in records:
            reg.store(record)
    return records


def legend_texts(svg_text: str) -> list[str]:
    """The legend's entries as the SVG holds them (the group matplotlib names legend_1)."""
    root = ET.fromstring(svg_text)
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("id") == "legend_1")
    return ["".join(t.itertext()).strip() for t in legend.iter(f"{SVG}text")]


def all_texts(svg_text: str) -> list[str]:
    return ["".join(t.itertext()).strip() for t in ET.fromstring(svg_text).iter(f"{SVG}text")]


def test_two_series_that_differ_in_m_are_labelled_m_128_and_m_256(cli, perfsuite_env, tmp_path):
    db = perfsuite_env["PERFSUITE_DB"]
    store_runs(db, 128, 0)
    store_runs(db, 256, 10)
    plot = tmp_path / "gemm.svg"
    out = json.loads(
        cli(
            "history", "--workload", "kernels.gemm", "--metric", "tflops", "--json", "--plot", str(plot), check=True
        ).stdout
    )
    assert len(out) == 2 and {s["key_settings"]["params"]["m"] for s in out} == {128, 256}
    svg = plot.read_text()
    assert sorted(legend_texts(svg)) == ["m=128", "m=256"]
    keys = [s["comparability_key"] for s in out]
    assert not [t for t in all_texts(svg) for k in keys if k[:6] in t]  # no hash anywhere on the plot
    # what both series share is on the plot once, above it
    page = " ".join(all_texts(svg))
    assert page.count("n=1024") == 1 and "k=1024" in page and "regime=" in page and "l2_flush=False" in page
    png = tmp_path / "gemm.png"
    cli("history", "--workload", "kernels.gemm", "--metric", "tflops", "--plot", str(png), check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_labels_name_every_setting_that_differs_and_only_those(cli, perfsuite_env):
    db = perfsuite_env["PERFSUITE_DB"]
    store_runs(db, 128, 0)
    store_runs(db, 256, 10)
    store_runs(db, 256, 20, l2_flush=True)
    out = json.loads(cli("history", "--workload", "kernels.gemm", "--metric", "tflops", "--json", check=True).stdout)
    by_m = sorted(
        zip(series_labels(out), out, strict=True),
        key=lambda pair: (pair[1]["key_settings"]["params"]["m"], str(pair[1]["key_settings"]["timing"])),
    )
    assert [label for label, _ in by_m] == ["m=128 l2_flush=False", "m=256 l2_flush=False", "m=256 l2_flush=True"]
    # one series alone is its case and metric
    assert series_labels(out[:1]) == ["bf16 tflops"]
