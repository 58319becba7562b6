"""The serving cross-check where the two clients count answers differently: against a server
that ends every second answer early (the null server's ``--cut-every 2``: ``[DONE]`` without a
finish reason), the suite fails those answers as truncated while the bare reference client, as
AIPerf, counts them; their TTFT and tokens/s are then of different answers, so the verdict is
"not comparable" with the counts, never "agrees". Real processes over 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from perfsuite.crosscheck.aiperf import counted_apart
from perfsuite.workloads.inference.serving.capacity import null_server

pytest.importorskip("httptools")


def test_rounds_whose_sides_completed_different_counts_are_named():
    same = {"suite": {"completed": 16, "failed": 0}, "reference": {"completed": 16.0, "failed": 0.0}}
    assert counted_apart([same, same], "aiperf") is None
    cut = {"suite": {"completed": 8, "failed": 8}, "reference": {"completed": 16, "failed": 0}}
    why = counted_apart([same, cut], "the reference")
    assert why == (
        "in round 2 the suite completed 8 requests (8 failed) and the reference 16 (0 failed): "
        "the figures are of different answers"
    )
    assert counted_apart([{"suite": {"completed": 8}, "reference": {}}], "aiperf") is None  # no count: no claim


def test_a_crosscheck_against_a_server_that_cuts_answers_short_is_not_comparable(cli):
    with null_server(extra=("--cut-every", "2")) as server:
        proc = cli(
            "crosscheck",
            "inference.serving",
            "--rounds",
            "1",
            "-p",
            f"url={server.url}",
            "-p",
            "model=null",
            "-p",
            "scenarios=",
            "-p",
            "crosscheck_requests=16",
            "-p",
            "measure_client=false",
            "--json",
        )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    (record,) = json.loads(proc.stdout)
    c = record["details"]["crosscheck"]
    assert c["status"] == "measured", c
    (round_,) = c["rounds"]
    suite, reference = round_["suite"], round_["reference"]
    assert suite["failed"] > 0 and suite["completed"] + suite["failed"] == 16, suite
    assert reference["completed"] == 16 and reference["failed"] == 0, reference  # it counts a cut answer
    assert c["agrees"] is False and c["counted_apart"].startswith(
        f"in round 1 the suite completed {suite['completed']} requests ({suite['failed']} failed) and the reference 16"
    )
    assert set(c["verdicts"].values()) == {f"not comparable: {c['counted_apart']}"}
    # what `perfsuite show` prints of it: the reason, not "agrees" (a narrow terminal cuts the note)
    show = cli("show", record["run_id"])
    assert show.returncode == 0, show.stderr
    assert "not comparable" in show.stdout and "agrees" not in show.stdout
