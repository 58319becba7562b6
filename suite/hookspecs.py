"""Hook specifications of the perfsuite plugin host.

Only specifications live here. Hooks take a ``register`` callback (or the object to
extend) instead of returning lists, so that the host checks names, duplicates and types
in one place rather than every plugin doing it. The host calls each plugin's
implementation on its own (``perfsuite.plugins.Host.call_each``): one that raises is recorded
as that plugin's error and the others still run.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("perfsuite")
hookimpl = pluggy.HookimplMarker("perfsuite")


@hookspec
def perfsuite_register_workloads(register):
    """Called once when the host builds its workload catalogue.

    Call ``register(WorkloadClass)`` for each workload the plugin provides. The class
    must subclass :class:`perfsuite.workload.Workload`; a name that another plugin registers
    too is disabled, with a warning that names both plugins. Importing the class must not import
    heavy packages (torch, DALI): do that inside its methods.
    """


@hookspec
def perfsuite_register_commands(cli):
    """Called when the CLI is built, before any command runs; add click commands or groups
    with ``cli.add_command``."""


@hookspec
def perfsuite_collect_environment(env):
    """Called while the environment fingerprint is taken, in the measuring process.

    ``env`` is the fingerprint dict; add what your workloads depend on under
    ``env["packages"]`` (name -> version) or a key named after your plugin. Never remove
    or rewrite what is already there.
    """


@hookspec
def perfsuite_record_stored(record, registry_url):
    """Called by the runner once for each run record it has stored in the registry, right after
    the commit (``perfsuite run``, ``crosscheck``, ``perfsuite.run``; not for records that
    ``perfsuite import`` loads).

    ``record`` is the validated record (a dict as its JSON file holds it; your own copy, so
    changing it changes nothing stored); ``registry_url`` is the registry's URL with any password
    hidden. Send the record on to a sink: a JSONL file, W&B, MLflow, a Prometheus push gateway.
    A hook that raises is reported as a warning on stderr and in ``perfsuite plugins``; the
    record stays stored and the run goes on.
    """
