"""The one plugin manager: built-in plugins first, exactly as outside ones, then the
``perfsuite`` entry-point group, restricted by ``PERFSUITE_PLUGINS``.

A plugin that fails to import, or whose registration hook raises, is kept as a load
error (shown by ``perfsuite plugins`` and ``perfsuite list``) and the others go on.
"""
from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from suite import hookspecs
from suite.workload import validate_workload_class

ENTRY_POINT_GROUP = "perfsuite"
ENV_PLUGINS = "PERFSUITE_PLUGINS"

# Built-in modules, registered through the same hooks as third-party plugins.
DEFAULT_PLUGINS = (
    "workloads.kernels",
    "workloads.collectives",
    "workloads.data",
)


class PluginError(RuntimeError):
    """A conflict between plugins (two workloads with one name); the message is one line."""


class UnknownWorkload(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    builtin: bool
    hooks: list[str] = field(default_factory=list)
    workloads: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "builtin": self.builtin, "hooks": self.hooks, "workloads": self.workloads, "error": self.error}


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

    # -- loading --------------------------------------------------------------------------
    def load_builtins(self) -> None:
        from suite import __version__

        for modname in DEFAULT_PLUGINS:
            info = PluginInfo(modname, "perfsuite", __version__, builtin=True)
            self._load(info, lambda m=modname: importlib.import_module(m))

    def load_entry_points(self, allowed: set[str] | None) -> None:
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if allowed is not None and ep.name not in allowed:
                continue
            dist = getattr(ep, "dist", None)
            info = PluginInfo(ep.name, dist.metadata["Name"] if dist else None, dist.version if dist else None,
                              builtin=False)
            self._load(info, ep.load)

    def _load(self, info: PluginInfo, load) -> None:
        self.plugins[info.name] = info
        try:
            module = load()
            self.pm.register(module, name=info.name)
        except Exception as exc:  # a broken plugin is reported, never fatal to the others
            info.error = f"{type(exc).__name__}: {exc}"
            return
        info.hooks = sorted(h.name for h in self.pm.get_hookcallers(module) or [])

    # -- the workload catalogue --------------------------------------------------------------
    def collect_workloads(self) -> None:
        for impl in self.pm.hook.perfsuite_register_workloads.get_hookimpls():
            info = self.plugins[impl.plugin_name]
            found: list[Any] = []
            try:
                impl.function(register=found.append)
                for cls in found:
                    validate_workload_class(cls)
            except Exception as exc:
                info.error = f"{type(exc).__name__} while registering workloads: {exc}"
                continue
            for cls in found:
                other = self.workloads.get(cls.name)
                if other is not None:
                    raise PluginError(f"workload {cls.name!r} is registered by two plugins: "
                                      f"{other.plugin.name!r} and {info.name!r}")
                self.workloads[cls.name] = WorkloadEntry(cls, info)
                info.workloads.append(cls.name)

    def get(self, name: str) -> WorkloadEntry:
        try:
            return self.workloads[name]
        except KeyError:
            raise UnknownWorkload(f"unknown workload {name!r} (see 'perfsuite list')") from None

    def errors(self) -> list[PluginInfo]:
        return [p for p in self.plugins.values() if p.error]


def allowed_plugins() -> set[str] | None:
    """``PERFSUITE_PLUGINS`` unset: every installed plugin; empty: none; else a comma list."""
    raw = os.environ.get(ENV_PLUGINS)
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


@functools.lru_cache(maxsize=1)
def get_host() -> Host:
    """The process's host, loaded once."""
    host = Host()
    host.load_builtins()
    host.load_entry_points(allowed_plugins())
    host.collect_workloads()
    return host
