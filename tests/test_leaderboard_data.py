"""The leaderboard's tables from a real SQLite registry, by the schemas' rules (one rule, not
two): a table is one comparability key, so harness parameters at their defaults pool while a
self-test is never ranked, and L2-flushed or not, 2 or 4 GPUs never pool; inference is ranked by
LoadGen's metric (never its accuracy); and a table read with the runs' series equals one
aggregated in SQL."""

from __future__ import annotations

from support.factories import gemm_metrics, make_metric, make_record

from perfsuite.publish.leaderboard import build_site
from perfsuite.publish.leaderboard.data import load, shown_settings
from perfsuite.registry import open_registry
from perfsuite.schemas.comparability import key_settings
from tests.conftest import REPO


def _cells(boards):
    return {
        (b.workload, c.id, r.system.name, case): (round(cell.value, 9), cell.count, cell.note)
        for b in boards
        for c in b.configs
        for r in c.rows
        for case, cell in r.cells.items()
    }


def _gemm(i: int, controls: dict | None = None, **kw) -> dict:
    times = tuple(1.0 + 0.01 * i + 0.001 * k for k in range(5))
    controls = {"seed": i, **(controls or {})}
    return make_record(host="box", device="cuda", controls=controls, metrics=gemm_metrics(time_ms=times), **kw)


def _collective(name: str, host: str, busbw: float, world: int) -> dict:
    """A collective's record at ``world`` ranks, ranked by its in-place bus bandwidth."""
    metrics = [make_metric("in-place", "busbw_gbps", "GB/s", [busbw] * 3, higher_is_better=True)]
    return make_record(
        workload_name=name,
        category="collectives",
        params={},
        host=host,
        device="cuda",
        gpu_count=world,
        launch={"world_size": world},
        metrics=metrics,
    )


def test_a_table_is_one_comparability_key_and_both_reads_agree(tmp_path):
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for i, inject in enumerate(("none", "none", "hang", "none", "none")):
            reg.store(_gemm(i, params={"m": 1024, "inject": inject}))  # "hang": a self-test
        reg.store(_gemm(5, params={"m": 1024, "inject": "none"}, controls={"l2_flush": False}))
        reg.store(_gemm(6, params={"m": 1024, "inject": "none"}, gpu_count=2, launch={"world_size": 2}))
        with reg.session() as s:
            series, _ = load(s)
            aggregated, _ = load(s, series=False)
    (board,) = series
    shown = [c.shown for c in board.configs]
    assert len(shown) == 3  # flushed, not flushed, and 2 ranks: never one table
    assert {s["timing.l2_flush"] for s in shown} == {"True", "False"}
    assert {s["world.world_size"] for s in shown} == {"1", "2"}
    assert all("param.inject" not in s and "self_test" not in str(s) for s in shown)
    (flushed,) = [c for c in board.configs if c.shown == shown_settings(key_settings(_gemm(0, params={"m": 1024})))]
    cell = flushed.rows[0].cells["bf16"]
    assert cell.count == 4 and cell.note == "4 runs, olympic mean" and len(cell.runs) == 4  # not the self-test
    assert _cells(series) == _cells(aggregated)
    assert "inject" not in " ".join(c.label for c in board.configs)


def test_the_standard_table_is_never_one_whose_figures_are_all_zero(tmp_path):
    """Two one-GPU systems' all_reduce (busbw zero at one rank by nccl-tests' formula) and one
    two-GPU system's: the board opens on the table with a figure, though fewer systems ran it."""

    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for host, busbw, world in (("one-a", 0.0, 1), ("one-b", 0.0, 1), ("two", 150.0, 2)):
            reg.store(_collective("collectives.all_reduce", host, busbw, world))
        with reg.session() as s:
            (board,), _ = load(s)
    by_world = {c.shown["world.world_size"]: c for c in board.configs}
    assert len(by_world["1"].rows) == 2 and by_world["1"].all_zero
    assert board.default is by_world["2"] and by_world["2"].default and not by_world["1"].default


def test_the_standard_table_of_a_collective_is_never_one_of_one_rank(tmp_path):
    """Two one-GPU systems' broadcast in place (a no-op at one rank, 8,402 GB/s on an H100) and
    one two-GPU system's: the board opens on the two ranks, and the one-rank table says why its
    figure is no interconnect's. A reduce measured at one rank only opens on it, and its front
    page card says so; a peer copy among the GPUs of one process does not."""

    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for host, busbw, world in (("one-a", 8402.1, 1), ("one-b", 8192.0, 1), ("two", 150.0, 2)):
            reg.store(_collective("collectives.broadcast", host, busbw, world))
        reg.store(_gemm(1, params={"m": 1024}))  # one rank, not a collective: nothing to say
        reg.store(_collective("collectives.reduce", "one-a", 8402.1, 1))  # measured at one rank only
        peer = [make_metric("p2p", "gbps", "GB/s", [388.2] * 3, higher_is_better=True)]  # four GPUs, one process
        reg.store(make_record(workload_name="collectives.copy_bandwidth", params={}, device="cuda", metrics=peer))
        with reg.session() as s:
            boards, _ = load(s)
        build_site(reg, tmp_path / "site")
    board = next(b for b in boards if b.workload == "collectives.broadcast")
    by_world = {c.shown["world.world_size"]: c for c in board.configs}
    assert by_world["1"].one_rank_collective and not by_world["1"].all_zero and len(by_world["1"].rows) == 2
    assert board.default is by_world["2"] and not by_world["2"].one_rank_collective
    assert not any(c.one_rank_collective for b in boards if b.workload == "kernels.gemm" for c in b.configs)
    page = (tmp_path / "site" / "workloads" / "collectives.broadcast.html").read_text()
    one_rank = page.split(f'id="cfg-{by_world["1"].id}"')[1].split("</section>")[0]
    two_ranks = page.split(f'id="cfg-{by_world["2"].id}"')[1].split("</section>")[0]
    assert "One rank: no byte crosses between GPUs" in one_rank and "One rank" not in two_ranks
    assert "One rank" not in (tmp_path / "site" / "workloads" / "kernels.gemm.html").read_text()
    cards = (tmp_path / "site" / "index.html").read_text().split('<section class="card">')[1:]
    card = {c.split("workloads/")[1].split(".html")[0]: c for c in cards}
    assert "1 rank: no interconnect measured" in card["collectives.reduce"]
    shown = ("collectives.broadcast", "collectives.copy_bandwidth", "kernels.gemm")
    assert not any("no interconnect" in card[name] for name in shown)


def test_inference_is_ranked_by_loadgens_metric_not_its_accuracy(tmp_path):
    metrics = [
        make_metric("Offline", "accuracy_score", "fraction", [0.99], higher_is_better=True),
        make_metric("Offline", "samples_per_s", "samples/s", [120.0, 121.0], higher_is_better=True),
        make_metric("SingleStream", "accuracy_score", "fraction", [0.98], higher_is_better=True),
        make_metric("SingleStream", "latency_p90_ms", "ms", [9.0], higher_is_better=False),
    ]
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        reg.store(make_record(workload_name="inference.generate", category="inference", host="box", metrics=metrics))
        with reg.session() as s:
            (board,), _ = load(s)
    cells = board.configs[0].rows[0].cells
    assert {case: c.metric for case, c in cells.items()} == {
        "Offline": "samples_per_s",
        "SingleStream": "latency_p90_ms",
    }


def test_a_serving_sweep_is_drawn_as_ttft_and_tpot_against_the_achieved_throughput_with_the_slos(tmp_path):
    """A rate sweep filed from an H100 (its record as the suite wrote it): its own rates drawn,
    not its peak search's repeats, each at the output tokens/s it achieved (not the rate
    offered), and the SLOs as level lines over them."""
    import json

    from perfsuite.publish.leaderboard import build_site

    (path,) = REPO.glob("submissions/perfsuite/results/h100-x1/inference.serving/fd30c10e*.json")
    record = json.loads(path.read_text())
    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        reg.store(record)
        build_site(reg, tmp_path / "site")
    page = (tmp_path / "site" / "workloads" / "inference.serving.html").read_text()
    assert '<script src="../data/inference.serving.js"></script>' in page  # the page loads its data file
    text = (tmp_path / "site" / "data" / "inference.serving.js").read_text()
    data = json.loads(text.removeprefix("window.PERFSUITE_BOARD = ").removesuffix(";\n"))
    (chart,) = data["charts"].values()
    assert chart["kind"] == "serving"
    steps = [s for s in record["details"]["serving"]["rate_sweep"]["steps"] if s["case"].startswith("rate ")]
    host = record["environment"]["host"]  # stored, not imported from the tree: the system is its host
    rates = [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]
    achieved = sorted(s["output_tokens_per_s"] for s in steps)
    # 8 s of arrivals for requests of 4.7 to 7.5 s: no step had a steady state, and each is drawn
    # as such (serving_steady), at the figure it filed
    assert chart["series"] == {
        f"{host} TTFT p99 · no steady state": sorted([s["output_tokens_per_s"], s["ttft_ms"]["p99"]] for s in steps),
        f"{host} TPOT p99 · no steady state": sorted([s["output_tokens_per_s"], s["tpot_ms"]["p99"]] for s in steps),
        "SLO TTFT": [[achieved[0], 1000.0], [achieved[-1], 1000.0]],
        "SLO TPOT": [[achieved[0], 100.0], [achieved[-1], 100.0]],
    }
    assert [s["load"] for s in steps] == rates
    assert data["configs"][0]["columns"][0]["metric"] == "goodput_at_slo_rps"


def test_the_standard_table_among_equals_is_the_one_that_measured_most_cases_then_the_newest(tmp_path):
    """Two systems ran each of four settings once: a sweep of many steps is shown first, before
    one step of it (run later); of two tables that measured as many cases, the newer first."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 11, 1, tzinfo=UTC)

    def runs(m: int, cases: list[str], start: datetime) -> list[dict]:
        return [
            make_record(
                params={"m": m, "n": 64, "k": 64, "dtype": "bf16"},
                host=host,
                started_at=start + timedelta(minutes=i),
                metrics=[make_metric(case, "tflops", "TFLOP/s", [1.0 + i], higher_is_better=True) for case in cases],
            )
            for i, host in enumerate(("box1", "box2"))
        ]

    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for record in [
            *runs(1, ["a", "b"], t0),  # older, two cases
            *runs(2, ["s1", "s2", "s3", "s4"], t0 + timedelta(days=1)),  # a sweep: four cases
            *runs(3, ["s2"], t0 + timedelta(days=2)),  # one of its steps, later
            *runs(4, ["c", "d"], t0 + timedelta(days=3)),  # as many cases as the oldest, newest
        ]:
            reg.store(record)
        with reg.session() as session:
            (board,) = load(session, "kernels.gemm")[0]
    assert [(c.settings["params"]["m"], c.measured) for c in board.configs] == [(2, 4), (4, 2), (1, 2), (3, 1)]
    assert board.default.settings["params"]["m"] == 2


def _training(
    host: str, world: int, global_batch: int, tokens_per_s: float, seed: int = 1, status: str = "success", **params
) -> dict:
    """A training.gpt record at ``world`` GPUs: its time to target and its throughput (``train``)."""
    metrics = [
        make_metric("target", "time_to_target_s", "s", [40.0 / world], higher_is_better=False),
        make_metric("train", "samples_per_s", "sequences/s", [tokens_per_s / 1024], higher_is_better=True),
        make_metric("train", "tokens_per_s", "tokens/s", [tokens_per_s], higher_is_better=True),
    ]
    return make_record(
        workload_name="training.gpt",
        category="training",
        host=host,
        device="cuda",
        gpu_count=world,
        params={"global_batch": global_batch, "precision": "bf16", **params},
        launch={"world_size": world},
        controls={"seed": seed},
        metrics=metrics,
        status=status,
    )


def _scaling(tmp_path, records: list[dict]) -> tuple[dict, dict]:
    """(the scaling charts by table id, the tables by (world, global batch)) of training.gpt's board."""
    from perfsuite.publish.leaderboard.scaling import scaling_charts

    with open_registry(f"sqlite:///{tmp_path / 'r.db'}") as reg:
        for record in records:
            reg.store(record)
        with reg.session() as s:
            (board,), _ = load(s, "training.gpt")
            charts = scaling_charts(s, board)
    tables = {(int(c.shown["world.world_size"]), int(c.shown["param.global_batch"])): c.id for c in board.configs}
    return charts, tables


def test_training_scales_strong_and_weak_across_the_tables_that_differ_only_in_their_world(tmp_path):
    """One system at 1, 2 and 4 GPUs with the global batch held (strong) and with the batch per
    GPU held (weak), a second system at 1 and 4 GPUs: each series is its system's median
    throughput per table, and its efficiency is over N times its one-GPU throughput."""
    records = [
        _training("box", 1, 16, 100_000.0),
        _training("box", 2, 16, 180_000.0),  # strong: 0.9
        _training("box", 4, 16, 300_000.0),  # strong: 0.75
        _training("box", 2, 32, 195_000.0),  # weak: 0.975
        _training("box", 4, 64, 370_000.0, seed=1),
        _training("box", 4, 64, 390_000.0, seed=2),  # two runs: their median, 380,000 (weak: 0.95)
        _training("other", 1, 16, 120_000.0),
        _training("other", 4, 16, 400_000.0),  # strong: 0.833
        _training("box", 4, 16, 900_000.0, status="failed"),  # never ranked, never drawn
    ]
    charts, tables = _scaling(tmp_path, records)
    one_gpu = charts[tables[(1, 16)]]
    assert (one_gpu["metric"], one_gpu["unit"]) == ("tokens_per_s", "tokens/s")
    series = {s["label"]: s for s in one_gpu["series"]}
    assert sorted(series) == [
        "box · strong scaling (global batch 16)",
        "box · weak scaling (16 per GPU)",
        "other · strong scaling (global batch 16)",
    ]
    strong = series["box · strong scaling (global batch 16)"]["points"]
    # the fifth field is the bare DDP loop's efficiency, the sixth the suite's over it from the
    # cross-check's rounds: none of these runs measured a bare loop
    assert all(v is None for *_, v in strong)
    assert [(w, t, round(e, 6), n, b) for w, t, e, n, b, _ in strong] == [
        (1, 100_000.0, 1.0, 1, None),
        (2, 180_000.0, 0.9, 1, None),
        (4, 300_000.0, 0.75, 1, None),
    ]
    weak = series["box · weak scaling (16 per GPU)"]["points"]
    assert [(w, t, round(e, 6), n, b) for w, t, e, n, b, _ in weak] == [
        (1, 100_000.0, 1.0, 1, None),
        (2, 195_000.0, 0.975, 1, None),
        (4, 380_000.0, 0.95, 2, None),
    ]
    other = series["other · strong scaling (global batch 16)"]
    assert other["base_world"] == 1 and round(other["points"][1][2], 4) == round(400_000 / (4 * 120_000), 4)
    # a 4-GPU table of the weak series shows that series only; one of the strong, the strong ones
    assert {s["kind"] for s in charts[tables[(4, 64)]]["series"]} == {"weak"}
    assert {s["kind"] for s in charts[tables[(4, 16)]]["series"]} == {"strong"}
    assert tables[(2, 32)] in charts


def test_a_table_with_another_setting_joins_no_scaling_series_and_a_series_without_one_gpu_says_its_base(tmp_path):
    """A 4-GPU run at another learning rate is no point of the 1-GPU run's series; a weak series
    measured at 2 and 4 GPUs only is judged against 2 GPUs."""
    records = [
        _training("box", 1, 16, 100_000.0),
        _training("box", 4, 16, 300_000.0, lr=0.001),
        _training("box", 2, 128, 190_000.0),
        _training("box", 4, 256, 360_000.0),
    ]
    charts, tables = _scaling(tmp_path, records)
    assert tables[(1, 16)] not in charts and tables[(4, 16)] not in charts
    (series,) = charts[tables[(2, 128)]]["series"]
    assert series["label"] == "box · weak scaling (64 per GPU)" and series["base_world"] == 2
    assert [round(p[2], 6) for p in series["points"]] == [1.0, round(360_000 * 2 / (4 * 190_000), 6)]
