"""The one plugin manager: built-in plugins first, exactly as outside ones, then the
``perfsuite`` entry-point group, restricted by ``PERFSUITE_PLUGINS``.

Every call into plugin code goes through one policy (:meth:`Host.call_each` for hooks,
:func:`guarded` for imports): each plugin is called on its own, anything it raises
(``SystemExit`` included, ``KeyboardInterrupt`` excepted) is kept as that plugin's error,
shown by ``perfsuite plugins``, ``list`` and on stderr, and the other plugins go on.

Every call into a third-party plugin (its import, each hook) has a bound,
``PERFSUITE_PLUGIN_TIMEOUT_S`` (default 10 s): it runs in a daemon thread, and a plugin that has
not returned by then is disabled with one warning naming it (the thread is abandoned; it ends
with the process), so that every command answers. A plugin hanging in each of N hooks costs at
most one bound: once disabled it is not called again. Built-in plugins are the host's own code
and are called directly.

A workload name registered by two plugins is disabled, with a warning naming both; the
rest of the catalogue keeps working. A built-in's name is not a third party's to take: a
plugin registering it is the one disabled, with a warning naming both, and the built-in
keeps working.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from perfsuite import hookspecs
from perfsuite.workload import validate_workload_class

ENTRY_POINT_GROUP = "perfsuite"
ENV_PLUGINS = "PERFSUITE_PLUGINS"
ENV_TIMEOUT = "PERFSUITE_PLUGIN_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 10.0

# Built-in modules, registered through the same hooks as third-party plugins.
DEFAULT_PLUGINS = (
    "perfsuite.workloads.kernels",
    "perfsuite.workloads.collectives",
    "perfsuite.workloads.data",
    "perfsuite.workloads.training",
    "perfsuite.workloads.inference",
)


class UnknownWorkload(KeyError):
    """A workload name that is not in the catalogue, or is disabled by a name conflict."""

    def __str__(self) -> str:
        return str(self.args[0])


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line; ``SystemExit(3)`` says its code."""
    text = " ".join(str(exc).split())
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def guarded(call: Callable[[], Any]) -> tuple[Any, str | None]:
    """Run plugin code: ``(result, None)``, or ``(None, error)`` for anything it raised but a
    Ctrl-C. ``SystemExit`` from a plugin must not end the host."""
    try:
        return call(), None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - one policy for plugin code, reported, never silent
        return None, describe(exc)


def bounded(call: Callable[[], Any], timeout_s: float) -> tuple[Any, str | None, bool]:
    """:func:`guarded` in a daemon thread, waited for ``timeout_s``: ``(result, error, timed_out)``.
    A call that has not returned is abandoned (a daemon thread does not keep the process alive);
    what it does later is nobody's result."""
    box: list[tuple[Any, str | None]] = []
    thread = threading.Thread(target=lambda: box.append(guarded(call)), name="perfsuite-plugin", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not box:
        return None, None, True
    result, error = box[0]
    return result, error, False


def plugin_timeout() -> tuple[float, str | None]:
    """``PERFSUITE_PLUGIN_TIMEOUT_S`` in seconds, and a warning where its value is not one (the
    default is kept then, never no bound)."""
    raw = os.environ.get(ENV_TIMEOUT)
    if raw is None or not raw.strip():
        return DEFAULT_TIMEOUT_S, None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        return DEFAULT_TIMEOUT_S, (
            f"{ENV_TIMEOUT}={raw!r} is not a number of seconds above 0: plugins get the default {DEFAULT_TIMEOUT_S:g} s"
        )
    return value, None


@dataclass
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    builtin: bool
    hooks: list[str] = field(default_factory=list)
    workloads: list[str] = field(default_factory=list)
    error: str | None = None
    disabled: list[str] = field(default_factory=list)  # its workload names taken by another plugin too
    timed_out: bool = False  # a call into it did not return within the bound: it is called no more

    def add_error(self, message: str) -> None:
        self.error = message if self.error is None else f"{self.error}; {message}"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "builtin": self.builtin,
            "hooks": self.hooks,
            "workloads": self.workloads,
            "error": self.error,
            "disabled": self.disabled,
        }


@dataclass(frozen=True)
class HookFailure:
    """One plugin's hook implementation that raised."""

    plugin: str
    hook: str
    error: str  # describe(exc)


@dataclass
class WorkloadEntry:
    cls: Any
    plugin: PluginInfo

    @property
    def name(self) -> str:
        return self.cls.name


class Host:
    """The plugin manager plus the workload catalogue built from it."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("perfsuite")
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginInfo] = {}
        self.workloads: dict[str, WorkloadEntry] = {}
        self.conflicts: dict[str, list[str]] = {}  # workload name -> the plugins that all registered it
        # workload name -> (the built-in plugin that keeps it, the third-party plugins refused it)
        self.shadowed: dict[str, tuple[str, list[str]]] = {}
        self.timeout_s, self.setting_warning = plugin_timeout()

    def _call(self, info: PluginInfo, what: str, call: Callable[[], Any]) -> tuple[Any, str | None]:
        """One call into ``info``'s code under the one policy: a built-in directly, a third party
        bounded by the timeout; a call that does not return disables the plugin."""
        if info.builtin:
            return guarded(call)
        result, error, timed_out = bounded(call, self.timeout_s)
        if timed_out:
            info.timed_out = True
            if self.pm.has_plugin(info.name):
                self.pm.unregister(name=info.name)
            return None, f"{what} did not return within {self.timeout_s:g} s: disabled ({ENV_TIMEOUT} sets the bound)"
        return result, error

    # -- loading --------------------------------------------------------------------------
    def load_builtins(self) -> None:
        from perfsuite.version import __version__

        for modname in DEFAULT_PLUGINS:
            info = PluginInfo(modname, "perfsuite", __version__, builtin=True)
            self._load(info, functools.partial(importlib.import_module, modname))

    def load_entry_points(self, allowed: set[str] | None) -> None:
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if allowed is not None and ep.name not in allowed:
                continue
            dist = getattr(ep, "dist", None)
            info = PluginInfo(
                ep.name, dist.metadata["Name"] if dist else None, dist.version if dist else None, builtin=False
            )
            self._load(info, ep.load)

    def _load(self, info: PluginInfo, load: Callable[[], Any]) -> None:
        self.plugins[info.name] = info
        # imported under the bound, registered here: an import that returns after its bound has
        # passed never registers a disabled plugin
        module, error = self._call(info, "its import", load)
        if error is None:
            _, error = guarded(lambda: self.pm.register(module, name=info.name))
        if error is not None:
            info.add_error(error)
            return
        info.hooks = sorted(h.name for h in self.pm.get_hookcallers(module) or [])

    # -- the one way to call a hook ---------------------------------------------------------
    def call_each(
        self, hook: str, per_plugin: Callable[[PluginInfo], dict] | None = None, **kwargs: Any
    ) -> list[HookFailure]:
        """Call each plugin's implementation of ``hook`` on its own, in pluggy's order.

        ``per_plugin(info)`` adds keyword arguments for one plugin (e.g. a ``register``
        callback that knows who registers). A plugin that raises has the error recorded
        against it and is returned as a :class:`HookFailure`; the others still run.
        """
        failures = []
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            info = self.plugins[impl.plugin_name]
            if info.timed_out:
                continue
            args = {**kwargs, **(per_plugin(info) if per_plugin else {})}
            _, error = self._call(info, hook, lambda: impl.function(**{k: args[k] for k in impl.argnames}))
            if error is not None:
                info.add_error(error if info.timed_out else f"{error} (in {hook})")
                failures.append(HookFailure(info.name, hook, error))
        return failures

    # -- the workload catalogue --------------------------------------------------------------
    def collect_workloads(self) -> None:
        found: dict[str, list[Any]] = {}

        def register_for(info: PluginInfo) -> dict:
            mine = found.setdefault(info.name, [])

            def register(cls: Any) -> None:
                validate_workload_class(cls)
                mine.append(cls)

            return {"register": register}

        failed = {f.plugin for f in self.call_each("perfsuite_register_workloads", per_plugin=register_for)}
        by_name: dict[str, list[tuple[Any, PluginInfo]]] = {}
        for plugin, classes in found.items():
            if plugin in failed:  # a plugin whose registration raised contributes nothing
                continue
            for cls in classes:
                by_name.setdefault(cls.name, []).append((cls, self.plugins[plugin]))
        for name, claims in by_name.items():
            builtins = [(cls, info) for cls, info in claims if info.builtin]
            if len(builtins) == 1 and len(claims) > 1:  # a third party cannot take a built-in's name
                others = list(dict.fromkeys(info.name for _, info in claims if not info.builtin))
                for _, info in claims:
                    if not info.builtin and name not in info.disabled:
                        info.disabled.append(name)
                self.shadowed[name] = (builtins[0][1].name, others)
                claims = builtins
            owners = list(dict.fromkeys(info.name for _, info in claims))
            if len(claims) > 1:
                self.conflicts[name] = owners
                for _, info in claims:
                    if name not in info.disabled:
                        info.disabled.append(name)
                continue
            cls, info = claims[0]
            self.workloads[name] = WorkloadEntry(cls, info)
            info.workloads.append(name)

    def get(self, name: str) -> WorkloadEntry:
        if name in self.conflicts:
            raise UnknownWorkload(f"workload {name!r} is disabled: {conflict_text(self.conflicts[name])}")
        try:
            return self.workloads[name]
        except KeyError:
            raise UnknownWorkload(f"unknown workload {name!r} (see 'perfsuite list')") from None

    def disabled_text(self, name: str) -> str:
        """Why workload ``name`` is disabled where a plugin registered it: two plugins took it, or
        it is a built-in's."""
        if name in self.shadowed:
            builtin, _ = self.shadowed[name]
            return f"the name belongs to the built-in plugin {builtin!r}, which keeps it"
        return conflict_text(self.conflicts[name])

    def errors(self) -> list[PluginInfo]:
        return [p for p in self.plugins.values() if p.error]

    def warnings(self) -> list[str]:
        """One line per problem a user should hear about: failed plugins, disabled names."""
        lines = [self.setting_warning] if self.setting_warning else []
        lines += [f"plugin {p.name} failed: {p.error}" for p in self.errors()]
        lines += [f"workload {name!r} disabled: {conflict_text(owners)}" for name, owners in self.conflicts.items()]
        return lines + self.shadowed_lines()

    def shadowed_lines(self) -> list[str]:
        """One line per built-in name a third party tried to take, naming both."""
        return [
            f"workload {name!r} of plugin {', '.join(repr(o) for o in others)} disabled: the name belongs to the "
            f"built-in plugin {builtin!r}, which keeps it"
            for name, (builtin, others) in self.shadowed.items()
        ]


def conflict_text(owners: list[str]) -> str:
    if len(owners) == 1:
        return f"registered twice by plugin {owners[0]!r}"
    quoted = [repr(o) for o in owners]
    return f"registered by {len(owners)} plugins: {', '.join(quoted[:-1])} and {quoted[-1]}"


def allowed_plugins() -> set[str] | None:
    """``PERFSUITE_PLUGINS`` unset: every installed plugin; empty: none; else a comma list."""
    raw = os.environ.get(ENV_PLUGINS)
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def recorded_workload(workload: dict) -> Any | None:
    """The class a record's ``workload`` section names, for showing the record: where a built-in
    plugin made it, that plugin's module alone is imported (a command that shows one run does not
    load every plugin: each workload module, and each third party's import under its bound); the
    built-in keeps its names, so this is the class the host would give. A run made by a third
    party's plugin is looked up in the host. None where no plugin has it now."""
    plugin = (workload.get("plugin") or {}).get("name")
    if plugin not in DEFAULT_PLUGINS:
        entry = get_host().workloads.get(workload["name"])
        return entry.cls if entry else None
    found: list[Any] = []
    importlib.import_module(plugin).perfsuite_register_workloads(register=found.append)
    return next((cls for cls in found if cls.name == workload["name"]), None)


@functools.lru_cache(maxsize=1)
def get_host() -> Host:
    """The process's host, loaded once."""
    host = Host()
    host.load_builtins()
    host.load_entry_points(allowed_plugins())
    host.collect_workloads()
    return host
