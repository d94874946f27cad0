"""The `spacegraph` command: demo, build (with --profile) and spaces."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _kv(items: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"spacegraph: {what} must look like NAME=VALUE; got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_build(args: argparse.Namespace) -> int:
    from harness.report.build_profile import format_profile, load_target, profile_build, to_json

    try:
        config = json.loads(args.config) if args.config else {}
    except json.JSONDecodeError as exc:
        raise SystemExit(f"spacegraph build: --config is not valid JSON: {exc}") from None
    try:
        factory, spaces = load_target(args.target, config, _kv(args.space, "--space"))
    except ValueError as exc:
        raise SystemExit(f"spacegraph build: {exc}") from None
    from harness.graph.errors import SpacegraphError

    for backend in args.backend:
        try:
            result = profile_build(factory, spaces, backend, repeats=args.repeats if args.profile else 1)
        except (SpacegraphError, ValueError, TypeError) as exc:
            raise SystemExit(f"spacegraph build {args.target} ({backend}): {type(exc).__name__}: {exc}") from None
        print(to_json(result) if args.json else format_profile(result))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from harness.demo import run_demo

    return run_demo(backends=args.backend)


def cmd_spaces(args: argparse.Namespace) -> int:
    import numpy as np

    from harness.spaces import parse

    try:
        space = parse(args.text)
    except ValueError as exc:
        raise SystemExit(f"spacegraph spaces: {exc}") from None
    try:
        value = space.sample(args.size, rng=args.seed)
    except ValueError as exc:
        raise SystemExit(f"spacegraph spaces: {exc}") from None
    print(f"space:  {space!r}")
    for path, leaf in space.flatten().items():
        print(f"  {path or '<root>'}: {leaf!r}  full shape {leaf.full_shape()}")
    flat = space.flatten_value(value)
    for path, v in flat.items():
        arr = np.asarray(v)
        print(f"sample {path or '<root>'}: shape {arr.shape} dtype {arr.dtype} min {arr.min() if arr.size else '-'} "
              f"max {arr.max() if arr.size else '-'}")
    print(f"contained: {space.contains(value)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `spacegraph` console script."""
    parser = argparse.ArgumentParser(prog="spacegraph", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="build spaces and a small network on both backends and show them")
    demo.add_argument("--backend", action="append", choices=["tf", "torch"],
                      help="backend(s) to use (repeatable; default both)")
    demo.set_defaults(fn=cmd_demo)

    build = sub.add_parser("build", help="build a component and print its API table (and phase times)")
    build.add_argument("target", help="a class path (package.module.Class) or a YAML file with class/config/input_spaces")
    build.add_argument("--backend", action="append", choices=["tf", "torch"], help="repeatable; default tf")
    build.add_argument("--config", help="constructor keyword arguments as JSON")
    build.add_argument("--space", action="append", metavar="ARG=SPACE", help="input space of a root API argument")
    build.add_argument("--profile", action="store_true", help="median phase times over --repeats builds")
    build.add_argument("--repeats", type=int, default=5)
    build.add_argument("--json", action="store_true", help="print JSON")
    build.set_defaults(fn=cmd_build)

    spaces = sub.add_parser("spaces", help="parse a space text, sample it and check containment")
    spaces.add_argument("text")
    spaces.add_argument("--size", type=int, default=None)
    spaces.add_argument("--seed", type=int, default=0)
    spaces.set_defaults(fn=cmd_spaces)

    from harness.specs.cli import add_spec_parser

    add_spec_parser(sub)

    args = parser.parse_args(argv)
    if getattr(args, "backend", None) is None and args.command in ("build", "demo"):
        args.backend = ["tf"] if args.command == "build" else ["tf", "torch"]
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
