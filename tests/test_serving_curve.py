"""inference.serving's latency-throughput curve (InferenceMAX's view): a real rate sweep through
``perfsuite run`` against the null streaming server, its tokens spaced by a known gap, and every
curve figure re-derived here from the requests the client streamed (tokens, first-token and end
times in the requests file beside the record): output tokens/s per GPU, per user (1000 / TPOT
p50), TTFT p50, the cost of a million output tokens and the joules per output token from the
given wattage; ``show`` prints the curve, ``export`` carries it; a run that says nothing of its
GPUs records 1 as assumed and its energy as unknown with the reason. The server command's GPU
count is read as vLLM, SGLang and TensorRT-LLM spell it."""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

import pytest

from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.curve import PER_USER_DEFINITION, engine_gpus, visible_devices

pytest.importorskip("httptools")

GAP_MS = 4.0  # the null server spaces its tokens this far apart: no request streams faster
TOKENS = 8
RATES = (20.0, 40.0)
REQUESTS = 24


@pytest.fixture(scope="module")
def gapped():
    with null_server(event_gap_ms=GAP_MS) as server:
        yield server


def _run(cli, tmp_path: Path, url: str, *extra: str) -> dict:
    args = ["run", "inference.serving", "--json", "-p", f"url={url}", "-p", "model=null", "-p", "scenarios="]
    args += ["-p", f"rates={','.join(f'{r:g}' for r in RATES)}", "-p", f"sweep_requests={REQUESTS}"]
    args += ["-p", f"output_tokens={TOKENS}", "-p", "warmup_requests=1", "-p", "measure_client=false"]
    for p in extra:
        args += ["-p", p]
    proc = cli(*args)
    # a step the loaded machine could not keep to its schedule is INVALID (exit 1): its curve is still recorded
    assert proc.returncode in (0, 1), proc.stdout[:3000] + proc.stderr[-2000:]
    records = sorted((tmp_path / "records").glob("*.json"))
    assert records, proc.stdout[-2000:]
    return json.loads(records[-1].read_text())


def _requests(serving: dict, step: dict) -> list[dict]:
    path = Path(serving["artifact_dir"]) / step["requests_file"]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_sweep_records_tokens_per_gpu_against_tokens_per_user_with_cost_and_energy(cli, tmp_path, gapped):
    record = _run(cli, tmp_path, gapped.url, "gpus=2", "price_per_gpu_hour=3.6", "currency=EUR", "power_w_per_gpu=500")
    serving = record["details"]["serving"]
    basis = serving["curve_basis"]
    assert (basis["gpus"], basis["gpus_source"], basis["gpus_assumed"]) == (2, "the gpus parameter", False)
    assert basis["currency"] == "EUR" and basis["per_user"] == PER_USER_DEFINITION
    sampled = _nvml_gpus() > 0  # on a GPU machine NVML samples the local server's GPUs instead
    assert basis["power"].startswith("NVML power of GPUs" if sampled else "given: 500 W per GPU x 2 GPUs")
    steps = serving["rate_sweep"]["steps"]
    assert [s["load"] for s in steps] == list(RATES)
    for step, rate in zip(steps, RATES, strict=True):
        rows = _requests(serving, step)
        ok = [r for r in rows if r["reason"] is None]
        assert len(ok) == REQUESTS and all(r["tokens"] == TOKENS for r in ok)  # the streamed tokens, counted
        tokens = sum(r["tokens"] for r in ok)
        span_s = REQUESTS / rate  # the schedule's span: the rate steps divide by it
        tpot_ms = [(r["done_ns"] - r["first_ns"]) / 1e6 / (r["tokens"] - 1) for r in ok]
        ttft_ms = [(r["first_ns"] - r["sent_ns"]) / 1e6 for r in ok]
        point = step["curve"]
        assert point["gpus"] == 2
        assert point["output_tokens_per_s_per_gpu"] == pytest.approx(tokens / span_s / 2, rel=1e-9)
        assert point["output_tokens_per_s_per_user"] == pytest.approx(1e3 / statistics.median(tpot_ms), rel=1e-9)
        # the server spaced every token GAP_MS apart: no user saw tokens faster than that
        assert point["output_tokens_per_s_per_user"] <= 1e3 / GAP_MS
        assert point["ttft_p50_ms"] == pytest.approx(statistics.median(ttft_ms), rel=1e-9)
        assert point["cost_per_million_output_tokens"] == pytest.approx(3.6 * 2 / 3600 / (tokens / span_s) * 1e6)
        assert point["currency"] == "EUR" and point["power_source"] == ("nvml" if sampled else "given")
        if not sampled:  # no NVML here: the given wattage is the energy
            assert point["joules_per_output_token"] == pytest.approx(500 * 2 * span_s / tokens)
            assert step["server_power"] is None
    # the tokens/s per GPU grow with the rate while the server keeps up
    assert steps[1]["curve"]["output_tokens_per_s_per_gpu"] > steps[0]["curve"]["output_tokens_per_s_per_gpu"]

    show = cli("show", record["run_id"])
    assert show.returncode == 0, show.stderr
    assert "output tokens/s per GPU against output tokens/s per user" in show.stdout
    assert "tok/s/user" in show.stdout and "EUR per M tok" in show.stdout
    assert "2 GPU(s) from the gpus parameter" in show.stdout
    table = show.stdout.split("(InferenceMAX's view)", 1)[1].splitlines()
    line = next(ln for ln in table if ln.startswith("rate 40"))
    fast = steps[1]["curve"]
    cells = [f"{fast[f]:.1f}" for f in ("output_tokens_per_s_per_user", "output_tokens_per_s_per_gpu")]
    assert line.split()[2:4] == cells, line

    export = cli("export", "--format", "csv", "--run", record["run_id"])
    assert export.returncode == 0, export.stderr
    rows = list(csv.DictReader(io.StringIO(export.stdout)))
    names = {(r.get("case"), r.get("metric") or r.get("name")) for r in rows}
    for name in ("output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user", "cost_per_million_output_tokens"):
        assert ("rate 40/s", name) in names, sorted(names)[:20]
    per_gpu = next(
        r
        for r in rows
        if r.get("case") == "rate 40/s" and (r.get("metric") or r.get("name")) == "output_tokens_per_s_per_gpu"
    )
    assert float(per_gpu["value"]) == pytest.approx(steps[1]["curve"]["output_tokens_per_s_per_gpu"], rel=1e-6)


def test_a_run_that_names_no_gpus_assumes_one_and_says_its_energy_is_unknown(cli, tmp_path, gapped):
    record = _run(cli, tmp_path, gapped.url)
    serving = record["details"]["serving"]
    basis = serving["curve_basis"]
    assert basis["gpus"] == 1 and basis["gpus_assumed"] and basis["gpus_source"].startswith("assumed: 1")
    sampled = _nvml_gpus() > 0  # on a GPU machine NVML samples the local server's GPUs instead
    assert basis["power"].startswith("NVML power" if sampled else "unknown: ")
    assert basis["cost"].startswith("unknown: no price_per_gpu_hour")
    for step in serving["rate_sweep"]["steps"]:
        point = step["curve"]
        assert point["output_tokens_per_s_per_gpu"] == pytest.approx(step["output_tokens_per_s"])
        assert point["cost_per_million_output_tokens"] is None and point["currency"] is None
        if not sampled:
            assert point["joules_per_output_token"] is None and point["power_source"] == "unknown"


def test_bad_curve_parameters_are_one_line_refusals(cli, gapped):
    for param, why in (
        ("gpus=-1", "gpus must not be negative"),
        ("price_per_gpu_hour=inf", "price_per_gpu_hour: 'inf' is not a finite number"),
        ("power_w_per_gpu=-5", "power_w_per_gpu must not be negative"),
        ("currency=", "currency must be a short name"),
    ):
        proc = cli("run", "inference.serving", "-p", f"url={gapped.url}", "-p", "rates=1", "-p", param)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert why in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("vllm serve m --tensor-parallel-size 4", (4, "the server command's tensor parallel 4")),
        (
            "vllm serve m -tp 2 --pipeline-parallel-size=2",
            (4, "the server command's tensor parallel 2 x pipeline parallel 2"),
        ),
        (
            "python -m sglang.launch_server --tp-size 8 --dp-size 2",
            (16, "the server command's tensor parallel 8 x data parallel 2"),
        ),
        ("trtllm-serve m --tp_size 2", (2, "the server command's tensor parallel 2")),
        ("env CUDA_VISIBLE_DEVICES=0,3 vllm serve m", (2, "the server command's CUDA_VISIBLE_DEVICES=0,3")),
        ("python -m transformers.cli.transformers serve m --port 1", None),
    ],
)
def test_the_engines_gpus_are_read_from_its_server_command(command, expected):
    assert engine_gpus(command) == expected


def test_the_servers_gpus_are_its_own_visible_devices_else_the_inherited_ones():
    assert visible_devices("env CUDA_VISIBLE_DEVICES=2,3 vllm serve m", {"CUDA_VISIBLE_DEVICES": "0"}) == ["2", "3"]
    assert visible_devices("vllm serve m", {"CUDA_VISIBLE_DEVICES": "1"}) == ["1"]
    assert visible_devices("vllm serve m", {}) is None


def _nvml_gpus() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except Exception:  # noqa: BLE001 - no NVML here: the test is skipped with that reason
        return 0


@pytest.mark.gpu
@pytest.mark.skipif(_nvml_gpus() == 0, reason="needs NVML and a GPU")
def test_on_a_gpu_machine_the_servers_gpus_power_is_sampled_and_gives_joules_per_token(cli, tmp_path, gapped):
    """The null server is local, so its GPU is GPU 0 (gpus=1): NVML's power of it, sampled during
    each step and integrated, over the step's output tokens."""
    record = _run(cli, tmp_path, gapped.url, "gpus=1", "power_w_per_gpu=1")
    serving = record["details"]["serving"]
    assert serving["curve_basis"]["power_gpus"] == [0] and serving["curve_basis"]["power"].startswith("NVML power")
    for step in serving["rate_sweep"]["steps"]:
        power, point = step["server_power"], step["curve"]
        assert power["gpus"] == [0] and power["samples"] >= 2 and power["energy_j"] > 0
        assert point["power_source"] == "nvml"
        assert point["joules_per_output_token"] == pytest.approx(power["energy_j"] / step["output_tokens"])
        assert power["mean_power_w"] == pytest.approx(power["energy_j"] / power["span_s"])
