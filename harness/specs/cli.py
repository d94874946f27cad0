"""The `spacegraph spec` subcommands: validate spec files, report spec coverage, print the JSON Schema."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

#: Where the committed JSON Schema lives, relative to the repository root.
SCHEMA_FILE = Path("specs") / "schema.json"


# ---- validate ----------------------------------------------------------------------------------


def collect_spec_files(paths: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The spec files among ``paths`` (files, or folders searched like `find_specs`).

    Returns:
        The files, and ``(path, problem)`` for paths that do not exist or hold no spec.
    """
    from harness.specs.loader import find_specs

    files, problems = [], []
    for path in paths:
        if os.path.isdir(path):
            found = find_specs(path)
            if os.path.isdir(os.path.join(path, "agents")):
                found += find_specs(path, "agents")
            if not found:
                problems.append((path, "the folder holds no *.yaml or *.yml spec files"))
            files += found
        elif os.path.isfile(path):
            files.append(path)
        else:
            problems.append((path, "no such file or folder"))
    return list(dict.fromkeys(files)), problems


def validate(paths: list[str], out: TextIO | None = None) -> int:
    """Loads every spec file under ``paths`` and prints ``OK`` or its located problems.

    Args:
        paths: spec files or folders (a folder holding ``components/`` is searched there, and
            in ``agents/`` beside it for agent specs; a file in a folder named ``agents`` is an agent spec).
        out: where to print (default stdout).

    Returns:
        0 when every file is valid, else 1.
    """
    from harness.specs.agents import load_agent_spec
    from harness.specs.loader import SpecError, load_spec

    out = out or sys.stdout
    files, missing = collect_spec_files(paths)
    for path, problem in missing:
        print(f"{path}: {problem}", file=out)
    bad = 0
    for path in files:
        try:
            is_agent = Path(path).parent.name == "agents"
            (load_agent_spec if is_agent else load_spec)(path)
            problems = []
        except SpecError as exc:
            problems = exc.problems
        if problems:
            bad += 1
            for key, msg in problems:
                msg = str(msg).replace("\n", "\n    ")  # continuation lines stay under their problem
                print(f"{path}: {key or '<top>'}: {msg}", file=out)
        else:
            print(f"{path}: OK", file=out)
    print(f"{len(files)} spec file(s) checked, {bad} with problems", file=out)
    return 1 if bad or missing else 0


# ---- schema ------------------------------------------------------------------------------------


def schema_text() -> str:
    """The JSON Schema of the spec format, as written to ``specs/schema.json``."""
    from harness.specs.schema import ComponentSpec

    return json.dumps(ComponentSpec.model_json_schema(), indent=2) + "\n"


# ---- argparse ----------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    """`spacegraph spec validate`."""
    return validate(args.paths or ["specs"])


def cmd_coverage(args: argparse.Namespace) -> int:
    """`spacegraph spec coverage`."""
    from harness.specs.coverage import coverage, format_report

    report = coverage(args.package, args.specs)
    print(format_report(report, verbose=args.verbose))
    return 0 if report.ok else 1


def cmd_schema(args: argparse.Namespace) -> int:
    """`spacegraph spec schema`."""
    text = schema_text()
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def add_spec_parser(subparsers: Any, default_package: str | None = None) -> argparse.ArgumentParser:
    """Registers ``spec validate|coverage|schema`` on the `spacegraph` command's subparsers.

    Each leaf parser sets ``fn`` to a function ``fn(args) -> exit code``.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers`` returned.
        default_package: the package ``spec coverage`` covers when ``--package`` is not given
            (the harness knows no package of its own; without a default ``--package`` is required).

    Returns:
        The ``spec`` parser.
    """
    spec = subparsers.add_parser("spec", help="validate spec files, report spec coverage, print the spec schema")
    sub = spec.add_subparsers(dest="spec_command", required=True)

    validate_p = sub.add_parser("validate", help="check spec files; print OK or located problems; exit 1 on any")
    validate_p.add_argument("paths", nargs="*", metavar="PATH", help="spec files or folders (default: specs/)")
    validate_p.set_defaults(fn=cmd_validate)

    coverage_p = sub.add_parser("coverage", help="list component and agent classes no spec names; exit 1 if any")
    coverage_p.add_argument("--package", default=default_package, required=default_package is None,
                            help="package to search for classes" + (f" (default: {default_package})" if default_package else ""))
    coverage_p.add_argument("--specs", default="specs", help="folder holding components/ and agents/")
    coverage_p.add_argument("-v", "--verbose", action="store_true", help="also list exempt classes")
    coverage_p.set_defaults(fn=cmd_coverage)

    schema_p = sub.add_parser("schema", help="print (or write) the JSON Schema of spec files")
    schema_p.add_argument("--out", metavar="FILE", help=f"write it here (the repository keeps {SCHEMA_FILE})")
    schema_p.set_defaults(fn=cmd_schema)
    return spec
