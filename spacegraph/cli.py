"""spacegraph: RL agents assembled from components described by their input spaces, on TensorFlow and PyTorch.

Commands: train an agent (train; actor joins a --serve learner), test components against their spec files (spec),
look at component graphs (graph, build, spaces) and checkpoints (checkpoint inspect), measure and compare (report),
start a component project (new), and a tour of it all (demo)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from spacegraph.logs import VERBOSE_HELP, import_tensorflow_quietly, set_log_level  # first: sets TF's log level
from spacegraph.arguments import positive_float
from spacegraph.serve import add_actor_parser
from spacegraph.train import add_train_parser

def _kv(items: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"spacegraph: {what} must look like NAME=VALUE; got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_build(args: argparse.Namespace) -> int:
    from harness.measure.build_profile import format_profile, load_target, profile_build, to_json

    try:
        config = json.loads(args.config) if args.config else {}
    except json.JSONDecodeError as exc:
        raise SystemExit(f"spacegraph build: --config is not valid JSON: {exc}") from None
    try:
        factory, spaces = load_target(args.target, config, _kv(args.space, "--space"))
    except ValueError as exc:
        raise SystemExit(f"spacegraph build: {exc}") from None
    from harness.graph.errors import SpacegraphError

    if "tf" in args.backend:
        import_tensorflow_quietly(args.verbose_logs)
    for backend in args.backend:
        try:
            result = profile_build(factory, spaces, backend, repeats=args.repeats if args.profile else 1)
        except (SpacegraphError, ValueError, TypeError) as exc:
            raise SystemExit(f"spacegraph build {args.target} ({backend}): {type(exc).__name__}: {exc}") from None
        print(to_json(result) if args.json else format_profile(result))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from spacegraph.demo import run_demo

    if "tf" in args.backend:
        import_tensorflow_quietly(args.verbose_logs)
    return run_demo(backends=args.backend, train_steps=args.train_steps, train_seconds=args.train_seconds)


def cmd_new_component(args: argparse.Namespace) -> int:
    from spacegraph.scaffold import new_component, snake_case

    try:
        written = new_component(args.name, args.dir, args.package)
    except (OSError, ValueError) as exc:
        print(f"spacegraph new component: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    snake = snake_case(args.name)
    print(f"next: write the oracle {snake}_apply (the spec's oracle check fails until then), then in {args.dir}: "
          f"spacegraph spec test specs")
    return 0


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
    parser = argparse.ArgumentParser(prog="spacegraph", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    verbose_help = VERBOSE_HELP
    parser.add_argument("--verbose", dest="verbose_logs", action="store_true", help=verbose_help)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="spaces, the Q-network on both backends and a short DQN CartPole run on each")
    demo.add_argument("--backend", action="append", choices=["tf", "torch"],
                      help="backend(s) to use (repeatable; default both)")
    demo.add_argument("--train-steps", type=int, default=4000,
                      help="env steps of the short DQN CartPole run per backend (0: skip it; default 4000)")
    demo.add_argument("--train-seconds", type=positive_float, default=15.0,
                      help="the most seconds of that run per backend (default 15)")
    demo.add_argument("--verbose", dest="verbose_logs", action="store_true", default=argparse.SUPPRESS,
                      help=verbose_help)
    demo.set_defaults(fn=cmd_demo)

    add_train_parser(sub)

    add_actor_parser(sub)

    build = sub.add_parser("build", help="build a component and print its API table (and phase times)")
    build.add_argument("target", help="a class path (package.module.Class) or a YAML file with class/config/input_spaces")
    build.add_argument("--backend", action="append", choices=["tf", "torch"], help="repeatable; default tf")
    build.add_argument("--config", help="constructor keyword arguments as JSON")
    build.add_argument("--space", action="append", metavar="ARG=SPACE", help="input space of a root API argument")
    build.add_argument("--profile", action="store_true", help="median phase times over --repeats builds")
    build.add_argument("--repeats", type=int, default=5)
    build.add_argument("--json", action="store_true", help="print JSON")
    build.add_argument("--verbose", dest="verbose_logs", action="store_true", default=argparse.SUPPRESS,
                      help=verbose_help)
    build.set_defaults(fn=cmd_build)

    spaces = sub.add_parser("spaces", help="parse a space text, sample it and check containment")
    spaces.add_argument("text")
    spaces.add_argument("--size", type=int, default=None)
    spaces.add_argument("--seed", type=int, default=0)
    spaces.set_defaults(fn=cmd_spaces)

    from spacegraph.graph_cmd import add_graph_parser  # `spacegraph graph`: drawings and TensorBoard export

    add_graph_parser(sub, verbose_help)

    from spacegraph.checkpoint_cmd import add_checkpoint_parser  # `spacegraph checkpoint inspect`

    add_checkpoint_parser(sub)

    from harness.specs.cli import add_spec_parser

    add_spec_parser(sub, default_package="reference_agents")

    new = sub.add_parser("new", help="write a template component with its spec and an oracle stub")
    new_sub = new.add_subparsers(dest="new_command", required=True)
    new_component = new_sub.add_parser(
        "component", help="a template component, its spec and an oracle stub in a project",
        description="Writes PACKAGE/<name>.py (a component that builds and runs: scale * inputs), "
                    "specs/components/<name>.yaml and <name>_apply in PACKAGE/oracles.py, a stub that raises "
                    "until you write it: `spacegraph spec test specs` fails on the oracle check until then. "
                    "Writes pyproject.toml too when DIR has none. Existing files are never overwritten.")
    new_component.add_argument("name", metavar="NAME", help="the class name, in CapWords (e.g. MyLayer)")
    new_component.add_argument("--dir", default=".", help="the project folder (default: here)")
    new_component.add_argument("--package", help="the package to put it in (default: the one package in DIR, "
                                                 "else my_components)")
    new_component.set_defaults(fn=cmd_new_component)
    from spacegraph.report.cli import add_report_parser  # the `report` command (spacegraph/report/)
    add_report_parser(sub)

    args = parser.parse_args(argv)
    if args.command != "report":  # validate mode for every command but the report's measurements
        os.environ.setdefault("SPACEGRAPH_VALIDATE", "1")
    set_log_level(args.verbose_logs)
    if args.command == "spec" and args.spec_command == "test":
        chosen = args.backend or [b for b in os.environ.get("SPACEGRAPH_BACKENDS", "tf,torch").split(",") if b.strip()]
        if "tf" in [b.strip() for b in chosen]:
            import_tensorflow_quietly(args.verbose_logs)
    if getattr(args, "backend", None) is None and args.command in ("build", "demo"):
        args.backend = ["tf"] if args.command == "build" else ["tf", "torch"]
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
