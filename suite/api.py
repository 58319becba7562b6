"""The Python API for people who drive perfsuite from their own code (a notebook, a CI script,
a sweep of their own): run a workload and get its record, load the registry as a DataFrame.

    import perfsuite

    record = perfsuite.run("kernels.gemm", params={"m": 4096, "dtypes": "bf16"},
                           controls={"device": "cuda", "min_time_s": 1.0})
    record.status, record.run_id, record.value()        # "success", "3f2a...", 612.4 (TFLOP/s)
    record["metrics"]                                   # the record, as its JSON file holds it

    df = perfsuite.load()                               # every run: one row per metric and case
    df[df.headline & (df.workload == "kernels.gemm")]

A run goes exactly as ``perfsuite run NAME`` would: in its own measuring process, checked
before it starts, its record written to the records folder and stored in the registry (and
announced to ``perfsuite_record_stored`` hooks). Bad input raises ``ValueError`` (an unknown
workload, parameter or control) before anything runs.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

# The run options a caller may set, as ``perfsuite run`` names them (perfsuite.controls.Controls).
CONTROL_NAMES = (
    "device",
    "seed",
    "deterministic",
    "warmup",
    "iterations",
    "min_time_s",
    "max_iterations",
    "l2_flush",
    "cuda_graph",
    "timeout_s",
    "profile",
)


class Record(Mapping[str, Any]):
    """A stored run record: read-only, with the record's own keys (``record["metrics"]``) and a
    few typed views of it. ``dict(record)`` is the record as its JSON file holds it."""

    def __init__(self, data: dict[str, Any], path: Path | None = None) -> None:
        self._data = data
        self.path = path  # the record's JSON file, where the runner wrote one

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Record({self.workload!r}, run_id={self.run_id!r}, status={self.status!r})"

    @property
    def run_id(self) -> str:
        return self._data["run_id"]

    @property
    def status(self) -> str:
        """success, failed, invalid (its output did not verify), skipped, timeout or aborted."""
        return self._data["status"]

    @property
    def ok(self) -> bool:
        """Succeeded, and nothing that checked its output failed."""
        return self.status == "success" and self._data["verification"]["status"] != "failed"

    @property
    def workload(self) -> str:
        return self._data["workload"]["name"]

    @property
    def params(self) -> dict[str, Any]:
        return self._data["workload"]["params"]

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return self._data["metrics"]

    def metric(self, name: str | None = None, case: str | None = None) -> dict[str, Any]:
        """A metric of the record: ``name`` in ``case`` (the first case that has it), or with no
        name the case's headline (the figure ``perfsuite run`` prints). KeyError if none."""
        from perfsuite.schemas.headline import case_headline, headline

        primary = self._data["workload"].get("primary_metric")
        if name is None:
            found = case_headline(self.metrics, case, primary) if case else headline(self.metrics, primary)
        else:
            found = next((m for m in self.metrics if m["name"] == name and case in (None, m["case"])), None)
        if found is None:
            raise KeyError(
                f"run {self.run_id} has no metric {name or 'headline'!r}" + (f" in case {case!r}" if case else "")
            )
        return found

    def value(self, name: str | None = None, case: str | None = None) -> float:
        """The value of :meth:`metric` (in its own unit: ``metric(...)["unit"]``)."""
        return float(self.metric(name, case)["value"])


def _options(controls: Any) -> dict[str, Any]:
    """Run options by ``perfsuite run``'s names from a Controls, a mapping of run options, or
    None (the defaults); a name that is not a run option is a ValueError."""
    from perfsuite.controls import Controls

    if isinstance(controls, Controls):
        return {name: getattr(controls, name) for name in CONTROL_NAMES}
    given = dict(controls or {})
    unknown = sorted(set(given) - set(CONTROL_NAMES))
    if unknown:
        raise ValueError(f"unknown controls {unknown}: valid: {', '.join(CONTROL_NAMES)}")
    return {name: value for name, value in given.items() if value is not None}


def run_requests(
    name: str,
    params: Mapping[str, Any] | None = None,
    controls: Any = None,
    *,
    quick: bool = False,
    nproc_per_node: int | None = None,
) -> list:
    """The run :func:`run` makes for these arguments, built by the builder ``perfsuite run``
    uses (:func:`perfsuite.engine.requests.build_requests`): the same arguments make the same
    request (workload, parameters, controls, ranks) on both paths. ValueError for anything
    that cannot run as asked."""
    from perfsuite.engine.requests import build_requests
    from perfsuite.plugins import get_host

    options = {**_options(controls), "quick": quick, "nproc_per_node": nproc_per_node}
    return build_requests(get_host(), [name], [(None, key, value) for key, value in (params or {}).items()], options)


def run(
    name: str,
    params: Mapping[str, Any] | None = None,
    controls: Any = None,
    *,
    quick: bool = False,
    db: str | None = None,
    records_dir: str | Path | None = None,
    nproc_per_node: int | None = None,
) -> Record:
    """Run one workload as ``perfsuite run NAME`` does and return its stored record.

    ``params``: parameter values by name (typed, or strings as ``-p`` takes them);
    ``controls``: run options by name (``device``, ``seed``, ``iterations``, ``min_time_s``,
    ``warmup``, ``l2_flush``, ``cuda_graph``, ``timeout_s`` ...) or a ``perfsuite.controls.Controls``;
    ``quick``: start from the workload's quick preset; ``db``: the registry URL (default:
    ``$PERFSUITE_DB``); ``records_dir``: where record files go (default: ``$PERFSUITE_RECORDS``);
    ``nproc_per_node``: ranks (default: as ``perfsuite run`` chooses them). The request is
    :func:`run_requests`'s, built by the same function as ``perfsuite run``'s.

    A run that fails, times out or is skipped still returns its record (see ``Record.status``).
    Raises ValueError for a workload, parameter or control that does not exist or a run that
    cannot start as asked (nothing ran); ``perfsuite.engine.runner.RegistryUnavailable`` when the
    registry fails before the measurement (nothing measured); ``RecordNotStored`` from the same
    module when the registry refused the record after it (its file is on disk: ``exc.path``).
    """
    from perfsuite.engine.runner import Runner
    from perfsuite.engine.session import PreflightError, preflight
    from perfsuite.registry import check_url, open_registry
    from perfsuite.registry import records_dir as default_records_dir

    (req,) = run_requests(name, params, controls, quick=quick, nproc_per_node=nproc_per_node)
    folder = Path(records_dir) if records_dir is not None else default_records_dir()
    runner = Runner(lambda: open_registry(db), folder, echo=lambda line: print(line, file=sys.stderr))
    try:
        preflight(runner, [req], check_url=lambda: check_url(db))
    except PreflightError as exc:
        raise ValueError(str(exc)) from None
    record = runner.run(req)
    if record is None:  # another node's rank 0 stores it (a multi-node launch)
        raise ValueError(f"{name}: this process is not rank 0's side of a multi-node launch; no record here")
    return Record(record, folder / f"{record['run_id']}.json")


def load(
    db: str | None = None,
    *,
    workload: str | None = None,
    since: str | dt.datetime | None = None,
    limit: int | None = None,
    status: str | None = None,
):
    """The registry's results as a pandas DataFrame: one row per metric and case of each run
    (newest run first), with the comparability key, system and run settings beside each value;
    the columns and their meaning are ``perfsuite.analysis.export.COLUMNS``. ``headline`` marks
    the figure each case is known by. Filters as ``perfsuite results``; ``since`` an ISO date
    or an aware datetime (a naive one is UTC). Needs pandas (``pip install 'perfsuite[export]'``)."""
    from perfsuite.analysis.export import frame, rows_of, stored_records
    from perfsuite.registry import open_registry

    if isinstance(since, str):
        since = dt.datetime.fromisoformat(since)
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=dt.UTC)
    with open_registry(db) as registry:
        records = stored_records(registry, workload, since, limit, status)
    return frame(rows_of(records))
