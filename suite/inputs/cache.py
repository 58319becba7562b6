"""The suite's cache folder: what a run makes once and every later run reuses (data sets, models
written from a config), never downloaded and never kept inside a run's record or artifacts.

The folder is ``$PERFSUITE_CACHE/<kind>`` or ``$XDG_CACHE_HOME/perfsuite/<kind>``
(``~/.cache/perfsuite/<kind>``). :func:`made_once` fills a temporary folder beside the final one
and renames it into place when complete, so a crash or a concurrent maker never leaves a
half-made entry that a later run would trust: the entry exists exactly when its stamp file does.

Public API (``perfsuite.inputs.cache``): :func:`cache_folder`, :func:`made_once`.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path


def cache_folder(kind: str) -> Path:
    """Where the cache's entries of ``kind`` (``"datasets"``, ``"models"``) live."""
    base = os.environ.get("PERFSUITE_CACHE")
    if base:
        return Path(base) / kind
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "perfsuite" / kind


def made_once(target: Path, stamp: str, make: Callable[[Path], None]) -> Path:
    """``target``, made first when its ``stamp`` file is absent: ``make(folder)`` fills a
    temporary folder (writing ``stamp`` last), which is renamed to ``target``. A concurrent
    maker that finishes first wins and ours is discarded; any other failure is raised."""
    if (target / stamp).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        make(tmp)
        if not (tmp / stamp).is_file():
            raise RuntimeError(f"making {target.name} wrote no {stamp}")
        if target.exists() and not (target / stamp).is_file():
            shutil.rmtree(target)  # an entry left without its stamp by an older writer: never trusted
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / stamp).is_file():
                raise  # not a concurrent maker's finished entry: a real error
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target
