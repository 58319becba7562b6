"""A system description's ``accelerator_hour_price_usd``: validated by the schema
and by ``check``/``submit``, written by ``submit --price-per-hour``, and pricing every
result filed under the system that has no cost of its own, in ``submit``'s output and on
the leaderboard (a real SQLite registry), labelled as coming from the system's price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.factories import make_metric, make_record, sign

from perfsuite.publish.submissions.tree import (
    check_tree,
    import_tree,
    record_text,
    system_description,
    validate_system,
)
from perfsuite.registry import open_registry
from perfsuite.schemas.cost import RUN_OPTION_SOURCE, SYSTEM_PRICE_SOURCE, result_cost
from tests.test_cli_errors import one_error_line

PRICE = 3.6  # USD per accelerator-hour: two GPUs cost 0.002 USD a second
TOKENS_PER_S = 50_000.0  # a million tokens take 20 s: 0.04 USD at two GPUs
OWN_COST = {
    "price_per_accelerator_hour_usd": 9.0,
    "accelerators": 2,
    "source": RUN_OPTION_SOURCE,
    "lines": [{"case": "bf16", "metric": "items_per_s", "usd": 0.4242, "per": "1M tokens"}],
}


def _tokens_run(seed: int, **overrides) -> dict:
    """A two-GPU run whose headline is a throughput in tokens, so it has a cost per 1M tokens."""
    metrics = [make_metric("bf16", "items_per_s", "tokens/s", [TOKENS_PER_S] * 5, higher_is_better=True)]
    return make_record(
        device="cuda",
        gpu_count=2,
        host="box1",
        metrics=metrics,
        controls={"seed": seed},
        launch={"world_size": 2, "nproc_per_node": 2},
        **overrides,
    )


def _file(root: Path, record: dict, system: str) -> None:
    path = root / "acme" / "results" / system / record["workload"]["name"] / f"{record['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record_text(record))


def _system(root: Path, record: dict, system: str, **changes) -> Path:
    path = root / "acme" / "systems" / f"{system}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**system_description(record, "acme", system), **changes}))
    return path


def test_the_schema_takes_a_positive_price_and_refuses_any_other():
    description = system_description(_tokens_run(1), "acme", "box", price_per_hour=PRICE)
    assert description["accelerator_hour_price_usd"] == PRICE and validate_system(description) == []
    for bad in (0, -1.0, "3.6", True, 2e6, float("nan")):
        errors = validate_system({**description, "accelerator_hour_price_usd": bad})
        assert len(errors) == 1 and errors[0].startswith("$.accelerator_hour_price_usd: "), (bad, errors)


def test_own_cost_wins_over_the_system_price_which_counts_the_accelerators_held():
    run = _tokens_run(1)
    args = (run["metrics"], "cuda", 2)
    assert result_cost(OWN_COST, PRICE, *args) is OWN_COST
    assert result_cost(None, None, *args) is None
    priced = result_cost(None, PRICE, *args)
    assert priced["source"] == SYSTEM_PRICE_SOURCE and priced["accelerators"] == 2
    assert priced["lines"][0]["usd"] == pytest.approx(0.04) and priced["lines"][0]["per"] == "1M tokens"
    assert result_cost(None, PRICE, run["metrics"], "cpu", 2)["lines"][0]["usd"] == pytest.approx(0.02)


def test_leaderboard_prices_results_without_a_cost_at_their_systems_price(tmp_path):
    """Three submitted systems: priced (its run has no cost), priced with a run that has its
    own cost (kept), and unpriced (no cost shown)."""
    root = tmp_path / "subs"
    plain, own, unpriced = _tokens_run(1), sign({**_tokens_run(2), "cost": OWN_COST}), _tokens_run(3)
    for system, record, price in (
        ("priced", plain, {"accelerator_hour_price_usd": PRICE}),
        ("own-cost", own, {"accelerator_hour_price_usd": PRICE}),
        ("unpriced", unpriced, {}),
    ):
        _system(root, record, system, **price)
        _file(root, record, system)
    from perfsuite.publish.leaderboard import build_site

    with open_registry(f"sqlite:///{tmp_path / 'lb.db'}") as reg:
        assert import_tree(reg, root)["stored"] == 3
        build_site(reg, tmp_path / "site")
    page = (tmp_path / "site" / "workloads" / "kernels.gemm.html").read_text()
    rows = {
        name: next(r.split("</tr>")[0] for r in page.split("<tr") if f">{name}<" in r)
        for name in ("priced", "own-cost", "unpriced")
    }
    assert "0.04 USD per 1M tokens [from the system&#39;s price]" in rows["priced"]
    assert "0.4242 USD per 1M tokens<" in rows["own-cost"] and "0.04 USD" not in rows["own-cost"]
    assert "USD" not in rows["unpriced"]
    system_pages = "".join(p.read_text() for p in (tmp_path / "site" / "systems").glob("*.html"))
    assert "0.04 USD per 1M tokens [from the system&#39;s price]" in system_pages


def test_check_names_the_system_file_of_a_price_that_is_not_a_positive_number(tmp_path, cli):
    root = tmp_path / "subs"
    run = _tokens_run(1)
    _file(root, run, "box")
    path = _system(root, run, "box", accelerator_hour_price_usd=float("nan"))  # json writes NaN
    assert [str(p) for p in check_tree(root).problems] == [
        f"acme/results/box/kernels.gemm/{run['run_id']}.json: no valid system file acme/systems/box.json for "
        f"system 'box'",
        f"{path.relative_to(root)}: $.accelerator_hour_price_usd: price per accelerator-hour must be a positive "
        f"number of USD below 1e+06, got nan",
    ]
    _system(root, run, "box", accelerator_hour_price_usd=0)
    checked = cli("check", str(root))
    assert checked.returncode == 1
    assert (
        f"problem: {path.relative_to(root)}: $.accelerator_hour_price_usd: 0 is less than or equal to the "
        f"minimum of 0" in checked.stderr.splitlines()
    )


def test_submit_writes_the_price_prices_the_runs_and_refuses_a_bad_one(cli, tmp_path):
    runs = [_tokens_run(11), sign({**_tokens_run(12), "cost": OWN_COST})]
    files = []
    for r in runs:
        (tmp_path / f"{r['run_id']}.json").write_text(record_text(r))
        files.append(str(tmp_path / f"{r['run_id']}.json"))
    cli("import", *files, check=True)
    root = tmp_path / "tree"
    ids = [r["run_id"] for r in runs]
    assert "--price-per-hour" in one_error_line(
        cli("submit", "--org", "acme", "--system", "box", "--root", str(root), "--price-per-hour", "-1", *ids)
    )
    assert not root.exists()
    out = cli(
        "submit",
        "--org",
        "acme",
        "--system",
        "box",
        "--root",
        str(root),
        "--price-per-hour",
        str(PRICE),
        *ids,
        check=True,
    ).stdout
    system_file = root / "acme" / "systems" / "box.json"
    assert json.loads(system_file.read_text())["accelerator_hour_price_usd"] == PRICE
    assert f"cost of {ids[0]}: 0.04 USD per 1M tokens (bf16) [from the system's price]" in out.splitlines()
    assert f"cost of {ids[1]}: 0.4242 USD per 1M tokens (bf16)" in out.splitlines()  # its own, kept
    other = make_record(device="cuda", gpu_count=2, host="box1", controls={"seed": 13})
    (tmp_path / "other.json").write_text(record_text(other))
    cli("import", str(tmp_path / "other.json"), check=True)
    line = one_error_line(
        cli("submit", "--org", "acme", "--system", "box", "--root", str(root), "--price-per-hour", "5", other["run_id"])
    )
    assert "exists with accelerator_hour_price_usd 3.6, not 5: change the price in that file" in line
    system_file.write_text(json.dumps({**json.loads(system_file.read_text()), "accelerator_hour_price_usd": -2}))
    line = one_error_line(cli("submit", "--org", "acme", "--system", "box", "--root", str(root), other["run_id"]))
    assert "$.accelerator_hour_price_usd: -2 is less than or equal to the minimum of 0" in line
    assert not list(root.glob(f"acme/results/box/*/{other['run_id']}.json"))  # refused before filing
