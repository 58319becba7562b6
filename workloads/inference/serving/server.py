"""The server's life when the suite starts it, reaching one that runs already, and what a
server says of itself.

Started: the command line (``server_command``, with ``{port}``, ``{model_dir}`` and
``{python}`` filled in) runs as a child of the measuring process, so it belongs to the run's
process tree: the runner's timeout kills the tree, and the measuring process's lifeline kills
its children when the runner dies. Its stdout and stderr go to ``server.log`` in the run's
artifact folder, kept beside the record. It is ready when its health endpoint answers 200;
a server that exits first, or is not ready within its timeout, is one line (with the log's
last line) and nothing is measured. At the end it gets SIGTERM, then SIGKILL with everything
it started (engines run worker processes of their own) after ``STOP_GRACE_S``.

Every probe of a server (its health, its self-report) is a GET whole within its bound, first
byte to last (``serving.http.get``): a server that trickles its answers or never ends them costs
a run at most ``PROBE_TIMEOUT_S`` for the health probe and ``SELF_REPORT_TIMEOUT_S`` for the
self-report, the grace the ``request_timeout_s`` parameter states.

Hub downloads are off in the server's environment (``HF_HUB_OFFLINE=1``,
``HF_HUB_DISABLE_UPDATE_CHECK=1``) unless the user set those variables: the values used are
recorded.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STOP_GRACE_S = 10.0
POLL_S = 0.25
PROBE_TIMEOUT_S = 5.0  # one GET of the health endpoint, whole
SELF_REPORT_TIMEOUT_S = 5.0  # every path of the self-report together
ENV_DEFAULTS = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "PYTHONUNBUFFERED": "1"}
# What engines expose about themselves, tried in turn (each missing one is recorded as such).
SELF_REPORT_PATHS = ("/v1/models", "/version", "/server_info", "/get_server_info", "/info", "/props")
# Readiness endpoints tried in turn when ``health_path`` is not set: vLLM, SGLang, TGI and
# llama.cpp answer /health; every OpenAI-compatible engine answers /v1/models.
HEALTH_PATHS = ("/health", "/v1/models")
# Web frameworks and HTTP servers an engine is built on: their name in a ``Server`` header says
# nothing of the engine, so it never names one.
FRAMEWORKS = frozenset(
    {
        "uvicorn",
        "hypercorn",
        "gunicorn",
        "aiohttp",
        "python",
        "werkzeug",
        "tornado",
        "granian",
        "daphne",
        "nginx",
        "envoy",
        "caddy",
        "apache",
        "cherrypy",
        "waitress",
        "starlette",
        "fastapi",
        "axum",
        "hyper",
        "actix-web",
        "go",
        "node",
        "express",
        "jetty",
    }
)
# ``owned_by`` values of /v1/models that name an organisation or a default, not an engine.
# ("local" is transformers serve's.)
GENERIC_OWNERS = frozenset(
    {"", "system", "organization-owner", "openai", "user", "owner", "me", "none", "null", "local"}
)


class ServerUnavailable(RuntimeError):
    """The endpoint cannot be measured: unreachable, or the started server never became ready."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def command_argv(command: str, port: int, model_dir: str) -> list[str]:
    """``server_command`` as an argument list, placeholders filled in."""
    words = shlex.split(command)
    if not words:
        raise ValueError("server_command is empty")
    fill = {"{port}": str(port), "{model_dir}": model_dir, "{python}": sys.executable}
    out = []
    for w in words:
        for key, value in fill.items():
            w = w.replace(key, value)
        out.append(w)
    return out


def http_get(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    """(status, Server header, body) of a GET whole within ``timeout_s``; raises OSError naming
    why there is no answer (unreachable, too slow, too large), ValueError for a bad URL."""
    from perfsuite.workloads.inference.serving.http import get

    outcome, body = get(url, timeout_s, tuple((headers or {}).items()))
    if outcome.failure is not None:
        reason, detail = outcome.failure
        raise OSError(f"{reason}: {detail}")
    return outcome.status, outcome.server, body


def probe(base_url: str, health_path: str, headers: dict[str, str] | None = None) -> int:
    """The health endpoint's status; raises ServerUnavailable (one line) when nothing answers."""
    try:
        status, _, _ = http_get(base_url.rstrip("/") + health_path, PROBE_TIMEOUT_S, headers)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerUnavailable(f"cannot reach {base_url}{health_path}: {reason}") from None
    return status


def health_paths(health_path: str) -> tuple[str, ...]:
    """The readiness endpoints to try: the one the user set, else :data:`HEALTH_PATHS`."""
    return (health_path,) if health_path else HEALTH_PATHS


def find_ready(base_url: str, health_path: str, headers: dict[str, str] | None = None) -> str:
    """The first readiness endpoint of :func:`health_paths` that answers 200, the next one asked
    only where the one before is absent (HTTP 404; :func:`absent`); raises ServerUnavailable (one
    line naming each path's answer and the option that fixes it)."""
    answers = []
    for path in health_paths(health_path):
        status = probe(base_url, path, headers)
        if status == 200:
            return path
        answers.append(f"{path}: HTTP {status}")
        if not absent(status):
            break
    raise ServerUnavailable(not_ready_line(base_url, health_path, answers))


def absent(status: int) -> bool:
    """Whether a readiness endpoint's answer says the engine has no such endpoint, so that the
    next one may be asked. Any other answer is the engine's own word on its readiness: llama.cpp's
    ``/health`` answers 503 while its model loads, and its ``/v1/models`` 200 already, so asking on
    would call a loading engine ready."""
    return status == 404


def not_ready_line(base_url: str, health_path: str, answers: list[str]) -> str:
    fix = (
        "set -p health_path=... to a path that answers 200 once the server is ready"
        if not health_path
        else "set -p health_path=... to another path, or leave it unset to try " + " and ".join(HEALTH_PATHS)
    )
    return f"no readiness endpoint of {base_url} answered 200 ({', '.join(answers)}): {fix}"


class ServerProcess:
    """A server started by the suite for one run."""

    def __init__(self, argv: list[str], log_path: Path, base_url: str, health_path: str) -> None:
        self.argv = argv
        self.log_path = log_path
        self.base_url = base_url
        self.health_path = health_path
        self.env_defaults = {k: v for k, v in ENV_DEFAULTS.items() if k not in os.environ}
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.ready_s: float | None = None
        self.ready_path: str | None = None  # the readiness endpoint that answered 200
        self.exit_code: int | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:  # the child holds its own copy of the descriptor
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **self.env_defaults},
                )
            except OSError as exc:
                raise ServerUnavailable(f"cannot start the server ({shlex.join(self.argv)}): {exc}") from None
        self.started_at = time.monotonic()

    def wait_ready(self, timeout_s: float) -> float:
        """Seconds until the health endpoint answered 200; raises ServerUnavailable."""
        assert self.proc is not None
        paths = health_paths(self.health_path)
        url = self.base_url.rstrip("/") + paths[0]
        deadline = self.started_at + timeout_s
        last: dict[str, str] = dict.fromkeys(paths, "no answer yet")
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.exit_code = code
                raise ServerUnavailable(
                    f"the server exited with code {code} before {url} answered; "
                    f"last log line: {self.last_log_line()!r} (log: {self.log_path})"
                )
            for path in paths:
                try:
                    left = max(0.01, min(PROBE_TIMEOUT_S, deadline - time.monotonic()))
                    status, _, _ = http_get(self.base_url.rstrip("/") + path, left)
                    if status == 200:
                        self.ready_s = time.monotonic() - self.started_at
                        self.ready_path = path
                        return self.ready_s
                    last[path] = f"HTTP {status}"
                    if not absent(status):
                        break  # the engine has this endpoint and says it is not ready yet
                except (OSError, ValueError) as exc:
                    last[path] = str(getattr(exc, "reason", exc))
                    break  # nothing answers yet: no other path will
            time.sleep(POLL_S)
        answers = [f"{path}: {why}" for path, why in last.items()]
        raise ServerUnavailable(
            f"the server was not ready within {timeout_s:g} s; "
            + not_ready_line(self.base_url, self.health_path, answers)
            + f"; last log line: {self.last_log_line()!r} (log: {self.log_path})"
        )

    def last_log_line(self) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> dict:
        """SIGTERM, then SIGKILL to the server and everything it started; what happened."""
        import psutil

        if self.proc is None:
            return {"stopped": False}
        if self.proc.poll() is not None:
            self.exit_code = self.proc.returncode
            return {"stopped": False, "exited_before_stop": True, "exit_code": self.exit_code}
        try:
            root = psutil.Process(self.proc.pid)
            family = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        for p in family:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                continue  # exited meanwhile
        _, alive = psutil.wait_procs(family, timeout=STOP_GRACE_S)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(alive, timeout=STOP_GRACE_S)
        self.exit_code = self.proc.wait(timeout=STOP_GRACE_S)
        return {"stopped": True, "killed_after_grace": len(alive), "exit_code": self.exit_code}

    def describe(self) -> dict:
        return {
            "argv": self.argv,
            "pid": self.proc.pid if self.proc else None,
            "log": self.log_path.name,
            "ready_after_s": self.ready_s,
            "health_path": self.ready_path,
            "health_paths_tried": list(health_paths(self.health_path)),
            "env_set": self.env_defaults,
        }


def self_report(base_url: str, headers: dict[str, str] | None = None) -> dict:
    """What the server says of itself: its models, version and info endpoints where it has
    them (vLLM ``/version``, SGLang ``/get_server_info``, TGI ``/info``, llama.cpp ``/props``), and
    its ``Server`` header. Each path's outcome is recorded, answered or not; all of them together
    take at most ``SELF_REPORT_TIMEOUT_S`` (a path left when it is spent says so)."""
    out: dict[str, Any] = {}
    deadline = time.monotonic() + SELF_REPORT_TIMEOUT_S
    for path in SELF_REPORT_PATHS:
        left = deadline - time.monotonic()
        if left <= 0:
            out[path] = {"error": f"not asked: the self-report's {SELF_REPORT_TIMEOUT_S:g} s were spent"}
            continue
        try:
            status, server, body = http_get(base_url.rstrip("/") + path, left, headers)
        except (OSError, ValueError) as exc:
            out[path] = {"error": str(getattr(exc, "reason", exc))}
            continue
        entry: dict[str, Any] = {"status": status}
        if server:
            out["server_header"] = server
        if status == 200:
            try:
                entry["body"] = _trim(json.loads(body))
            except ValueError:
                entry["body"] = body[:200].decode("utf-8", "replace")
        out[path] = entry
    return out


def _trim(obj: Any, depth: int = 0) -> Any:
    """A JSON answer cut down to what a record should hold (no long lists, no deep nesting)."""
    if depth > 3:
        return "..."
    if isinstance(obj, dict):
        return {str(k)[:80]: _trim(v, depth + 1) for k, v in list(obj.items())[:40]}
    if isinstance(obj, list):
        return [_trim(v, depth + 1) for v in obj[:8]]
    if isinstance(obj, str):
        return obj[:300]
    return obj


def engine_from_report(report: dict) -> dict:
    """The engine's name and version as far as what it exposes tells them, and where each came
    from (``source``): a version endpoint (vLLM ``/version``, SGLang ``/get_server_info``, TGI
    ``/info``, llama.cpp ``/props``), the ``Server`` header unless it names a web framework
    (uvicorn and the like, which say nothing of the engine), ``owned_by`` of ``/v1/models``
    unless it names a default (transformers serve's ``local``); else unknown (None)."""
    engine: dict[str, Any] = {"name": None, "version": None, "source": None}
    version = (report.get("/version") or {}).get("body") or {}
    if isinstance(version, dict) and version.get("version"):
        engine.update(name="vllm", version=str(version["version"]), source="/version")
    info = (report.get("/get_server_info") or report.get("/server_info") or {}).get("body")
    if isinstance(info, dict) and info.get("version") and engine["name"] is None:
        engine.update(name="sglang", version=str(info["version"]), source="/get_server_info")
    tgi = (report.get("/info") or {}).get("body")
    if isinstance(tgi, dict) and tgi.get("version") and engine["name"] is None:
        engine.update(name="text-generation-inference", version=str(tgi["version"]), source="/info")
    props = (report.get("/props") or {}).get("body")  # llama.cpp's server: its build number and commit
    if isinstance(props, dict) and props.get("build_info") and engine["name"] is None:
        engine.update(name="llama.cpp", version=str(props["build_info"]), source="/props build_info")
    header = str(report.get("server_header") or "").strip()
    name, _, rest = header.partition("/")
    if header and name.strip().lower() not in FRAMEWORKS:
        if engine["name"] is None:
            engine.update(name=name.strip(), version=rest.split()[0] if rest.strip() else None, source="server header")
    elif header:
        engine["server_header_ignored"] = f"{header!r} names a web framework, not the engine"
    if engine["name"] is None:
        owner = _owned_by(report)
        if owner is not None:
            engine.update(name=owner, source="/v1/models owned_by")
    if engine["name"] is None:
        engine["source"] = "unknown: the server names no engine (no version endpoint, Server header or owned_by)"
    return engine


def _owned_by(report: dict) -> str | None:
    body = (report.get("/v1/models") or {}).get("body")
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None
    owner = str(data[0].get("owned_by") or "").strip()
    return owner if owner.lower() not in GENERIC_OWNERS else None
