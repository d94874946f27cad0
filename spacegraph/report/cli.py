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
                    "one run on this machine and writes report.md, report.html, report.json, CSV and PNG plots. "
                    "--from-json draws a committed run again without measuring; --headline writes the headline "
                    "figures table from the committed runs.")
    p.add_argument("--quick", action="store_true",
                   help="small budgets: about 20 minutes on 2 cores for all scenarios, and about a minute per "
                        "learning_long run (CartPole, 2 per seed) (the full run takes hours: IMPALA learning on Pong "
                        "alone is 2 x 120 minutes, the learning_long reference runs hours each; pick scenarios with "
                        "--only)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these scenarios (--list names them)")
    p.add_argument("--seeds", type=int, default=2, help="seeds of the learning curves (default 2)")
    p.add_argument("--out", help="output folder (default reports/history/<date>-<short rev>/; the latest run of a "
                                 "scenario is committed as reports/NAME/); checked before anything runs")
    p.add_argument("--no-peers", action="store_true", help="leave RLlib out")
    p.add_argument("--baselines", help="folder of published baseline YAML files (default reports/baselines)")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--from-json", metavar="PATH",
                   help="draw again without measuring: a report.json this command wrote, or one scenario's measured "
                        "result with --only NAME (e.g. a long run committed under reports/)")
    p.add_argument("--headline", metavar="DIR", nargs="?", const="reports",
                   help="write DIR/headline.md (default reports/), the headline figures table, from DIR/NAME/"
                        "report.json of each scenario, and the section between <!-- headline:start --> and "
                        "<!-- headline:end --> of the README.md beside DIR; measures nothing")
    p.set_defaults(fn=cmd_report)
    return p


def cmd_report(args: argparse.Namespace) -> int:
    """Runs the selected scenarios and writes the report; prints where it went.

    Returns 2 for an unknown scenario, a bad baseline file, a ``--from-json`` file that is not a report.json or
    a result of the ``--only`` scenario, a ``--headline`` folder with a damaged report.json, or an ``--out`` that
    is a file, cannot be made or is not writable (checked before anything runs); 1 when ``--out`` fails while
    writing (the report then goes to a new temporary folder, named on stderr).
    """
    import spacegraph.report.scenarios  # noqa: F401  (registers the scenarios)
    from harness.execution.serialization import check_out_dir
    from spacegraph.report import headline, rerender, runner, writers
    from spacegraph.report.registry import SCENARIOS, select

    if args.list:
        for s in SCENARIOS.values():
            print(f"{s.name:18s} {s.title} ({s.figure_ref})")
        return 0
    try:
        if args.headline:
            for path in headline.write(args.headline, list(SCENARIOS)):
                print(f"wrote {path}")
            return 0
        scenarios = select(args.only)
        out = check_out_dir(args.out or runner.default_out_dir(), "--out")  # before minutes of measuring
        if args.from_json:
            report = rerender.rerender(args.from_json, SCENARIOS, args.only, args.baselines)
        else:
            report = runner.run(scenarios, quick=args.quick, seeds=args.seeds, peers=not args.no_peers,
                                only=args.only, baseline_dir=args.baselines)
    except (ValueError, OSError) as exc:
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
