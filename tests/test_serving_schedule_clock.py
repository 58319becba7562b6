"""What a client process loads for a step is loaded before the step's schedule starts: the token
counter read from a ``tokenizer.json`` (a large vocabulary takes a tenth of a second or more) is
ready before the job's start time is set, read once per process and kept for the next step, and a
tokenizer that cannot be read fails the step before its schedule starts, from one client process
and from two. CPU only, against the null server; a few seconds."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from perfsuite.workloads.inference.serving.capacity import null_server
from perfsuite.workloads.inference.serving.client import Endpoint, Timeouts
from perfsuite.workloads.inference.serving.load import ClientPool, Job, arrival_offsets_s

pytest.importorskip("httptools")

REQUESTS = 12


def _tokenizer(folder) -> str:
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(2000)}}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir()
    core.save(str(folder / "tokenizer.json"))
    return str(folder)


def _job(url: str, tokenizer: str) -> Job:
    bodies = dict.fromkeys(range(REQUESTS), b'{"model":"null","prompt":"w1 w2 w3","max_tokens":16,"stream":true}')
    return Job(
        Endpoint(url, "null"),
        Timeouts(),
        bodies,
        list(range(REQUESTS)),
        arrival_offsets_s(REQUESTS, 200.0, 1.0, seed=0),
        1,
        tokenizer,
    )


def test_the_token_counter_is_read_once_and_before_the_schedule_starts(tmp_path):
    tokenizer = _tokenizer(tmp_path / "tok")
    with null_server() as server, ClientPool(1) as pool:
        first = _job(server.url, tokenizer)
        results = pool.run(first)
        assert len(results) == REQUESTS and all(r.ok for r in results)
        sender = pool._here
        assert sender is not None
        ready = sender.prepared_ns[tokenizer]
        assert 0 < ready <= first.start_ns  # the schedule started after the tokenizer was read
        second = _job(server.url, tokenizer)
        assert all(r.ok for r in pool.run(second))
        assert sender.prepared_ns[tokenizer] == ready < second.start_ns  # kept, not read again


@pytest.mark.parametrize("processes", [1, 2])
def test_a_tokenizer_that_cannot_be_read_fails_the_step_before_its_schedule_starts(tmp_path, processes):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{ not a tokenizer")
    with null_server() as server, ClientPool(processes) as pool:
        job = _job(server.url, str(broken))
        with pytest.raises(Exception, match=r"the tokenizer .*broken.* cannot be read"):
            pool.run(job)
        assert job.start_ns == 0  # no schedule was started, so no request was sent
        good = _job(server.url, _tokenizer(tmp_path / "tok"))
        assert all(r.ok for r in pool.run(good))  # the pool still serves the next step
