"""The `spacegraph spec` subcommands: run the spec checks, validate spec files, report coverage, print the schema.

They work on any project's spec files: the classes a spec names import from the spec's
project root (`harness.specs.project`), as under ``pytest --spacegraph-specs``.
"""

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

    from harness.specs.project import add_import_roots

    out = out or sys.stdout
    files, missing = collect_spec_files(paths)
    add_import_roots(files)
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


# ---- test ---------------------------------------------------------------------------------------


def pytest_args(paths: list[str], backends: list[str] | None = None, keyword: str | None = None,
                exitfirst: bool = False, verbose: int = 0, extra: str = "") -> list[str]:
    """The pytest command line that runs the spec checks of ``paths`` and nothing else.

    Each path is both a collection argument and a ``--spacegraph-specs`` location, so the
    pytest plugin (`harness.testing.pytest_plugin`) turns the spec files under it into checks.
    """
    import shlex

    args = ["-p", "harness.testing.pytest_plugin"]
    for path in paths:
        args += [path, "--spacegraph-specs", path]
    if backends:
        args += ["--spacegraph-backends", ",".join(backends)]
    if keyword:
        args += ["-k", keyword]
    if exitfirst:
        args.append("-x")
    args += ["-v"] * verbose
    return args + shlex.split(extra)


def cmd_test(args: argparse.Namespace) -> int:
    """`spacegraph spec test`: pytest's exit code (0 all passed, 1 some failed, 4 usage, 5 nothing collected)."""
    import pytest

    paths = args.paths or ["specs"]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        for path in missing:
            print(f"spacegraph spec test: {path}: no such file or folder", file=sys.stderr)
        return 4
    return int(pytest.main(pytest_args(paths, args.backend, args.keyword, args.exitfirst, args.verbose,
                                       args.pytest or "")))


# ---- schema ------------------------------------------------------------------------------------


def schema_text() -> str:
    """The JSON Schema of the spec format, as written to ``specs/schema.json``."""
    from harness.specs.schema import ComponentSpec

    return json.dumps(ComponentSpec.model_json_schema(), indent=2) + "\n"


# ---- argparse ----------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    """`spacegraph spec validate`."""
    return validate(args.paths or ["specs"])


def spec_packages(spec_root: str) -> list[str]:
    """The top-level packages the spec files under ``spec_root`` (components/ and agents/) name, sorted."""
    import yaml

    names = set()
    for kind in ("components", "agents"):
        folder = Path(spec_root) / kind
        for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError):
                continue  # coverage() reports it
            for key in ("component", "agent"):
                target = data.get(key) if isinstance(data, dict) else None
                if isinstance(target, str) and target.strip(". :"):
                    names.add(target.split(".")[0].split(":")[0])
    return sorted(names)


def default_spec_root(package: str) -> Path | None:
    """The ``specs`` folder beside ``package``'s source folder (a checkout's); else, for a package installed
    from a checkout (site-packages carries no specs), ``./specs`` when it holds ``components/``; else None.
    The command prints which folder it read."""
    import importlib.util

    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    origin = found.origin if found is not None else None
    if origin:
        candidate = Path(origin).resolve().parent.parent / "specs"
        if candidate.is_dir():
            return candidate
    here = Path("specs")
    return here.resolve() if (here / "components").is_dir() else None


def cmd_coverage(args: argparse.Namespace) -> int:
    """`spacegraph spec coverage`: 0 when every class has a spec, 1 when some lack one, 2 for a bad spec folder."""
    from harness.specs.coverage import coverage, format_report
    from harness.specs.project import add_import_roots

    def fail(message: str) -> int:
        print(f"spacegraph spec coverage: {message}", file=sys.stderr)
        return 2

    given = args.path or args.specs
    if given is not None:
        root = Path(given)
        if not root.is_dir():
            return fail(f"{given}: no such folder (give the folder that holds components/ and agents/)")
        if root.name in ("components", "agents") and not (root / "components").is_dir():
            root = root.parent  # the folder of spec files itself: its parent holds it
        if not (root / "components").is_dir() and not (root / "agents").is_dir():
            return fail(f"{given}: holds no components/ or agents/ folder; coverage reads spec files from "
                        f"{given}/components and {given}/agents")
        add_import_roots([root])
    else:
        root = None
    packages = [args.package] if args.package else (spec_packages(str(root)) if root is not None else [])
    if not packages:
        if args.default_package is None:
            args.parser.error("spec coverage: give --package (the package whose classes need specs) or a spec "
                              "folder PATH whose specs name it")
        packages = [args.default_package]
    if root is None:
        root = default_spec_root(packages[0])
        if root is None:
            return fail(f"found no specs folder beside the package {packages[0]!r} (an installed copy carries "
                        f"none): give the spec folder, e.g. spacegraph spec coverage path/to/specs")
    ok = True
    for package in packages:
        report = coverage(package, root)
        print(f"package {package}, specs {root}:")
        print(format_report(report, verbose=args.verbose))
        ok = ok and report.ok
    return 0 if ok else 1


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
    """Registers ``spec test|validate|coverage|schema`` on the `spacegraph` command's subparsers.

    Each leaf parser sets ``fn`` to a function ``fn(args) -> exit code``.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers`` returned.
        default_package: the package ``spec coverage`` covers when ``--package`` is not given
            (the harness knows no package of its own; without a default ``--package`` is required).

    Returns:
        The ``spec`` parser.
    """
    spec = subparsers.add_parser("spec", help="test and validate spec files, report spec coverage, print the spec schema")
    sub = spec.add_subparsers(dest="spec_command", required=True)

    test_p = sub.add_parser("test", help="run the spec checks of spec files (build, in-space, oracle, parity, ...) "
                                         "with pytest; exit 1 if any fails",
                            description="Run every check the component suite runs on the spec files under PATH "
                                        "(pytest with the spacegraph plugin: pytest PATH --spacegraph-specs PATH). "
                                        "The classes a spec names import from its project root (the folder above "
                                        "it with pyproject.toml, setup.cfg, setup.py, pytest.ini, tox.ini or .git).")
    test_p.add_argument("paths", nargs="*", metavar="PATH", help="spec files or folders (default: specs/)")
    test_p.add_argument("--backend", action="append", choices=["tf", "torch"],
                        help="repeatable (default: SPACEGRAPH_BACKENDS, else both)")
    test_p.add_argument("-k", dest="keyword", metavar="EXPR", help="only checks matching EXPR (pytest -k), "
                                                                   "e.g. 'oracle and torch'")
    test_p.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failure")
    test_p.add_argument("-v", "--verbose", action="count", default=0, help="list every check")
    test_p.add_argument("--pytest", metavar="ARGS", help="more pytest arguments, in one string")
    test_p.set_defaults(fn=cmd_test)

    validate_p = sub.add_parser("validate", help="check spec files; print OK or every located problem; exit 1 on any")
    validate_p.add_argument("paths", nargs="*", metavar="PATH", help="spec files or folders (default: specs/)")
    validate_p.set_defaults(fn=cmd_validate)

    coverage_p = sub.add_parser("coverage", help="list component and agent classes no spec names; exit 1 if any",
                                description="List the component and agent classes of a package that no spec file "
                                            "names. Without PATH the specs folder beside the package's source "
                                            "(a checkout's) is used, else ./specs; with PATH and no --package, the packages the "
                                            "spec files name are covered.")
    coverage_p.add_argument("path", nargs="?", metavar="PATH", help="the folder holding components/ (and agents/)")
    coverage_p.add_argument("--package", default=None,
                            help="package to search for classes" + (f" (default: the packages the specs name, "
                                                                    f"else {default_package})" if default_package
                                                                    else " (default: the packages the specs name)"))
    coverage_p.add_argument("--specs", default=None, help=argparse.SUPPRESS)  # the older spelling of PATH
    coverage_p.add_argument("-v", "--verbose", action="store_true", help="also list exempt classes")
    coverage_p.set_defaults(fn=cmd_coverage, default_package=default_package, parser=coverage_p)

    schema_p = sub.add_parser("schema", help="print (or write) the JSON Schema of spec files")
    schema_p.add_argument("--out", metavar="FILE", help=f"write it here (the repository keeps {SCHEMA_FILE})")
    schema_p.set_defaults(fn=cmd_schema)
    return spec
