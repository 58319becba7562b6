"""Cross-check rounds (``perfsuite.crosscheck``): the suite and its reference take turns going
first, and the number of rounds comes from ``--rounds`` or the environment, whole and positive."""

from __future__ import annotations

import pytest


def test_the_suite_and_its_reference_take_turns_going_first():
    from perfsuite.crosscheck import take_turns

    log = []

    def side(name):
        def run():
            log.append(name)
            return len(log)

        return run

    turns = take_turns(4, "first suite loop", side("suite"), side("reference"))
    assert log == ["reference", "reference", "suite", "suite", "reference", "reference", "suite"]
    assert [t["order"] for t in turns] == ["suite first", "reference first", "suite first", "reference first"]
    assert turns[0]["suite"] == "first suite loop" and turns[1] == {
        "order": "reference first",
        "suite": 3,
        "reference": 2,
    }


def test_rounds_come_from_the_option_or_the_environment_and_must_be_whole_and_positive(cli, perfsuite_env):
    from perfsuite.crosscheck import DEFAULT_ROUNDS, ENV_ROUNDS, rounds

    assert rounds({}) == DEFAULT_ROUNDS and rounds({ENV_ROUNDS: "5"}) == 5
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError, match=ENV_ROUNDS):
            rounds({ENV_ROUNDS: bad})
    proc = cli("crosscheck", "kernels.gemm", "--device", "cpu", "--quick", "--rounds", "0")
    assert proc.returncode == 2 and "--rounds" in proc.stderr
    perfsuite_env[ENV_ROUNDS] = "many"
    proc = cli("crosscheck", "kernels.gemm", "--device", "cpu", "--quick")
    assert proc.returncode == 2 and f"{ENV_ROUNDS}='many' is not a whole number" in proc.stderr
