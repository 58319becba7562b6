"""perfsuite's host: the public API that workload plugins build on.

Plugins import only what this module exports::

    from suite import hookimpl, Workload, Case, Work, Check, Requirements, param
"""
from __future__ import annotations

from suite.hookspecs import hookimpl
from suite.workload import Case, Check, Requirements, Work, Workload, param

__version__ = "0.1.0"

__all__ = ["hookimpl", "Workload", "Case", "Work", "Check", "Requirements", "param", "__version__"]
