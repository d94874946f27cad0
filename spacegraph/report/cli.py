"""The ``spacegraph report`` command: `add_report_parser` registers it on the ``spacegraph`` parser."""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Any


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``report`` to ``subparsers`` (of ``spacegraph``'s parser); its function is `cmd_report`."""
    p = subparsers.add_parser(
        "report", help="every report figure (ours on both backends, RLlib, published baselines) in one run",
        description="Runs the report scenarios for spacegraph on both backends and for RLlib (extra 'peers') in "
                    "one run on this machine and writes report.md, report.html, CSV and PNG plots.")
    p.add_argument("--quick", action="store_true", help="small budgets: about 10 minutes on 2 cores")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these scenarios (--list names them)")
    p.add_argument("--seeds", type=int, default=2, help="seeds of the learning curves (default 2)")
    p.add_argument("--out", help="output folder (default reports/<date>-<short rev>/); checked before anything runs")
    p.add_argument("--no-peers", action="store_true", help="leave RLlib out")
    p.add_argument("--baselines", help="folder of published baseline YAML files (default reports/baselines)")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.set_defaults(fn=cmd_report)
    return p


def cmd_report(args: argparse.Namespace) -> int:
    """Runs the selected scenarios and writes the report; prints where it went.

    Returns 2 for an unknown scenario, a bad baseline file or an ``--out`` that is a file, cannot be made or is
    not writable (checked before anything runs); 1 when ``--out`` fails while writing (the report then goes to
    a new temporary folder, named on stderr).
    """
    import spacegraph.report.scenarios  # noqa: F401  (registers the scenarios)
    from harness.execution.serialization import check_out_dir
    from spacegraph.report import runner, writers
    from spacegraph.report.registry import SCENARIOS, select

    if args.list:
        for s in SCENARIOS.values():
            print(f"{s.name:14s} {s.title} ({s.figure_ref})")
        return 0
    try:
        scenarios = select(args.only)
        out = check_out_dir(args.out or runner.default_out_dir(), "--out")  # before minutes of measuring
        report = runner.run(scenarios, quick=args.quick, seeds=args.seeds, peers=not args.no_peers, only=args.only,
                            baseline_dir=args.baselines)
    except ValueError as exc:
        print(f"spacegraph report: {exc}", file=sys.stderr)
        return 2
    try:
        paths = writers.write(report, out)
    except OSError as exc:  # (the folder was fine at the start) the results are not lost: they go elsewhere
        rescue = tempfile.mkdtemp(prefix="spacegraph-report-")
        paths = writers.write(report, rescue)
        print(f"spacegraph report: --out {out}: cannot be written now ({exc}); the report went to {rescue}/ "
              f"instead", file=sys.stderr)
        return 1
    print(f"report written to {paths['md'].parent}/ (report.md, report.html, headline.csv, "
          f"{sum(1 for k in paths if k.endswith('_png'))} plots) in {report.seconds / 60:.1f} min")
    if report.peers_note:
        print(f"peers: {report.peers_note}")
    if report.load_warning:
        print(f"load warning: {report.load_warning}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m spacegraph.report.cli ...``: the command without the ``spacegraph`` parser."""
    parser = argparse.ArgumentParser(prog="spacegraph")
    add_report_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", *(sys.argv[1:] if argv is None else argv)])
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
