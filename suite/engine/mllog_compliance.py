"""MLPerf Training's own compliance checker (``mlperf_logging``, the optional ``mlperf``
extra) run on MLLOG files: its common training rules, then the rules a workload family
ships for its benchmarks (e.g. ``workloads/training/mlperf_rules/perfsuite_training.yaml``).

Why not the checker's command line: its common rules queue ``<division>_common.yaml``,
which accepts only MLPerf's own benchmarks (and then queues their files). Here each rules
file is checked in turn with the checker's own engine, and what a rules file queues is
dropped: the suite's rules file takes the place of MLPerf's per-benchmark files.

    python -m perfsuite.engine.mllog_compliance RULES.yaml FILE.mllog [FILE.mllog ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

RULESET = "6.1.0"


class ComplianceUnavailable(RuntimeError):
    """mlperf_logging is not installed (``pip install perfsuite[mlperf]``)."""


def common_rules(ruleset: str = RULESET) -> Path:
    try:
        from mlperf_logging.compliance_checker import mlp_compliance
    except ImportError:
        raise ComplianceUnavailable(
            "the compliance check needs mlperf-logging: pip install 'perfsuite[mlperf]'"
        ) from None
    path = Path(mlp_compliance.__file__).parent / f"training_{ruleset}" / "common.yaml"
    if not path.exists():
        raise ComplianceUnavailable(f"mlperf-logging has no training ruleset {ruleset}")
    return path


def check(mllog_path: Path, rules: list[Path], ruleset: str = RULESET) -> list[str]:
    """The checker's messages for one MLLOG file (warnings count as failures); [] = compliant."""
    common = common_rules(ruleset)
    from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser

    loglines, errors = mlp_parser.parse_file(str(mllog_path), ruleset=ruleset)
    messages = [f"line does not parse: {err}: {line}" for line, err in errors]
    if not loglines:
        return [*messages, "no :::MLLOG lines"]
    checker = mlp_compliance.make_checker("training", ruleset, quiet=False, werror=True)
    for config in (common, *rules):
        checker.configured_checks(loglines, str(config))
        mlp_compliance.enqueued_configs.clear()  # MLPerf's per-benchmark files: replaced by ``rules``
    return (
        messages
        + list(checker.warnings.values())
        + list(checker.overwritable.values())
        + list(checker.not_overwritable)
    )


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(
            "usage: python -m perfsuite.engine.mllog_compliance RULES.yaml FILE.mllog [FILE.mllog ...]", file=sys.stderr
        )
        return 2
    rules, files = Path(argv[0]), [Path(a) for a in argv[1:]]
    failed = 0
    for f in files:
        try:
            messages = check(f, [rules])
        except ComplianceUnavailable as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 2
        print(f"{f}: {'compliant' if not messages else 'NOT compliant'}")
        for m in messages:
            print("  " + m.replace("\n", "\n  "))
        failed += bool(messages)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
