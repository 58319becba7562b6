"""The shape of one doctor finding, and how findings add up to a verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass

VERDICTS = ("ok", "warn", "fail", "unknown")


@dataclass(frozen=True)
class Finding:
    """One check's outcome: ``value`` is what was seen, ``why`` why it matters (or, for
    ``unknown``, why it could not be read)."""

    check: str
    scope: str  # "host" or "gpu0", "gpu1", ...
    verdict: str
    value: str
    why: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


def overall(findings: list[Finding]) -> str:
    """fail if any check failed, else warn if any warned, else ok (unknowns do not count)."""
    verdicts = {f.verdict for f in findings}
    return "fail" if "fail" in verdicts else "warn" if "warn" in verdicts else "ok"


def to_dicts(findings: list[Finding]) -> list[dict]:
    return [asdict(f) for f in findings]
