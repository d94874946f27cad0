"""`spacegraph graph`: draws a built component graph (DOT, SVG, PNG, HTML) or exports it to TensorBoard.

The drawing itself is generic (`harness.graph.visualize`); this module loads what to draw (a
component spec file, a class path, or an agent config), builds it, and writes the TensorBoard
graph of each root API method with the component scopes as name scopes (TF: the traced
``tf.function``; PyTorch: ``torch.utils.tensorboard`` over a module tree that mirrors the
components).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import types
import warnings
from typing import Any, Callable

from spacegraph.logs import VERBOSE_HELP, import_tensorflow_quietly

FORMATS = ("html", "svg", "png", "dot", "tensorboard")


class _Target:
    """What to draw: an executor with its assembly, or the error its build raised."""

    def __init__(self, name: str, executor: Any = None, error: BaseException | None = None) -> None:
        self.name, self.executor, self.error = name, executor, error


def _is_component_file(path: str) -> bool:
    if not path.endswith((".yaml", ".yml", ".json")):
        return False
    from harness.specs.loader import SpecError, read_spec_mapping

    try:
        data = read_spec_mapping(path)
    except SpecError:
        return False  # not a readable spec: the agent config reader names the file and what is wrong
    return "component" in data


def _load(args: argparse.Namespace) -> _Target:
    """Builds the target of ``args``; a build error is kept in the result, not raised."""
    from harness.execution.executor import GraphExecutor

    text = args.target
    is_file = os.path.isfile(text)
    component = (is_file and _is_component_file(text)) or (
        not is_file and "." in text and not text.endswith((".yaml", ".yml", ".json")) and "/" not in text)
    if component:
        from harness.measure.build_profile import load_target

        try:
            config = json.loads(args.config) if args.config else {}
        except json.JSONDecodeError as exc:
            raise SystemExit(f"spacegraph graph: --config is not valid JSON: {exc}") from None
        spaces = {}
        for item in args.space or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise SystemExit(f"spacegraph graph: --space must look like NAME=SPACE; got {item!r}")
            spaces[key.strip()] = value.strip()
        try:
            factory, input_spaces = load_target(text, config, spaces)
        except ValueError as exc:
            raise SystemExit(f"spacegraph graph: {exc}") from None
        backend = args.backend or "tf"
        if backend == "tf":
            import_tensorflow_quietly(args.verbose_logs)
        name = os.path.splitext(os.path.basename(text))[0] if is_file else text.rsplit(".", 1)[-1]
        try:
            root = factory()
        except (TypeError, ValueError) as exc:
            raise SystemExit(f"spacegraph graph: {text}: cannot make the component: {exc}") from None
        try:
            return _Target(name, GraphExecutor(root, input_spaces, backend=backend, seed=args.seed or 0,
                                               compile="first_call"))
        except Exception as exc:  # noqa: BLE001 - drawn as far as the build got
            return _Target(name, error=exc)
    if args.config or args.space:
        raise SystemExit("spacegraph graph: --config and --space are for components (spec files, class paths), "
                         "not agent configs")
    from reference_agents.agents import ConfigError, build_agent, load_config, resolve_config_path

    try:
        path = resolve_config_path(text)
        config, _ = load_config(path, {"backend": args.backend, "seed": args.seed})
    except ConfigError as exc:
        raise SystemExit(f"spacegraph graph: {exc}") from None
    if config.backend == "tf":
        import_tensorflow_quietly(args.verbose_logs)
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        agent = build_agent(path, backend=args.backend, seed=args.seed)
    except Exception as exc:  # noqa: BLE001 - a ConfigError wrapping the build error: drawn as far as it got
        return _Target(name, error=exc)
    return _Target(name, agent.executor)


def _model(target: _Target) -> Any:
    from harness.graph.visualize import GraphModel

    if target.error is not None:
        return GraphModel.from_exception(target.error, title=f"{target.name} (build failed)")
    executor = target.executor
    tower_of = getattr(executor.strategy, "tower_of", None)  # the multi-device strategies' hook
    return GraphModel.from_assembly(executor.assembly, title=f"{target.name}: {type(executor.root).__name__} "
                                    f"on {executor.backend_name}", tower_of=tower_of)


# ---- TensorBoard ----------------------------------------------------------------------------------


def _scoped_chain(api: Any, trace: Any, wrap: Callable[[Any, Callable], Callable]) -> Callable:
    """``api.chain`` with each step ``_s<i>`` (the i-th step of ``trace``) replaced by ``wrap(step, fn)``."""
    chain = api.chain
    env = dict(chain.__globals__)
    names = sorted((k for k in env if re.fullmatch(r"_s\d+", k)), key=lambda k: int(k[2:]))
    if len(names) != len(trace.steps):
        raise RuntimeError(f"{api.name}: the call chain has {len(names)} steps, the trace {len(trace.steps)}")
    for i, step in enumerate(trace.steps):
        env[f"_s{i}"] = wrap(step, env[f"_s{i}"])
    return types.FunctionType(chain.__code__, env, chain.__name__, chain.__defaults__, chain.__closure__)


def _scope_name(step: Any) -> str:
    name = re.sub(r"[^A-Za-z0-9_.\-/]", "_", f"{step.component.global_scope}/{step.spec.name}")
    return name if re.match(r"[A-Za-z0-9.]", name) else "c" + name


def _export_tf(executor: Any, trace: Any, api: Any, out_dir: str) -> None:
    from harness.backends.tf_import import import_tensorflow

    tf = import_tensorflow()

    def wrap(step: Any, fn: Callable) -> Callable:
        scope = _scope_name(step)

        def call(*args: Any) -> Any:
            with tf.name_scope(scope):
                return fn(*args)
        return call

    fn = _scoped_chain(api, trace, wrap)
    backend = executor.backend
    if trace.records:
        fn = backend.ops.recording(fn)
    signature = [backend.input_spec(s) for s in api.arg_spaces.values()]
    concrete = tf.function(fn, input_signature=signature, autograph=False).get_concrete_function()
    writer = tf.summary.create_file_writer(out_dir)
    with writer.as_default():
        tf.summary.graph(concrete.graph)
    writer.flush()
    writer.close()


def _export_torch(executor: Any, trace: Any, api: Any, out_dir: str) -> None:
    import numpy as np
    import torch
    from torch.utils.tensorboard import SummaryWriter

    class Scope(torch.nn.Module):
        """One component: its variables as parameters/buffers; ``forward`` runs one of its graph functions."""

        def forward(self, fn: Callable, *args: Any) -> Any:  # noqa: D102
            return fn(*args)

    def safe(name: str) -> str:
        return re.sub(r"\W", "_", name) or "_"

    modules: dict[int, torch.nn.Module] = {}
    root = executor.root
    for comp in root.walk():
        module = modules[id(comp)] = Scope()
        for name, var in comp.variables.items():
            if isinstance(var, torch.nn.Parameter):
                module.register_parameter(safe(name), var)
            elif isinstance(var, torch.Tensor):
                module.register_buffer(safe(name), var)
        if comp.parent is not None and comp is not root:
            modules[id(comp.parent)].add_module(safe(comp.scope), module)

    fn = _scoped_chain(api, trace, lambda step, f: (lambda *a, m=modules[id(step.component)]: m(f, *a)))

    class Root(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.add_module(safe(root.scope), modules[id(root)])

        def forward(self, *args: Any) -> Any:  # noqa: D102
            return fn(*args)

    rng = np.random.default_rng(executor.seed)

    def sample(leaf: Any) -> Any:  # batch/time size 2; an unbounded integer (a count, a batch size) is 2
        size = tuple(2 for _ in leaf.extra_ranks) or None
        if np.dtype(leaf.dtype).kind in "iu" and not leaf.bounded:
            return torch.as_tensor(np.full(leaf.full_shape(2, 2), 2, dtype=leaf.dtype))
        return torch.as_tensor(np.asarray(leaf.sample(size, rng)))

    inputs = [space.unflatten({p: sample(leaf) for p, leaf in space.leaves()}) for space in api.arg_spaces.values()]
    gradients = trace.records
    writer = SummaryWriter(out_dir)
    caught = io.StringIO()  # add_graph prints its tracing errors before raising them
    try:
        with torch.enable_grad() if gradients else torch.no_grad(), warnings.catch_warnings(), \
                contextlib.redirect_stdout(caught):
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            writer.add_graph(Root(), tuple(inputs), use_strict_trace=False)
    finally:
        writer.close()


def export_tensorboard(executor: Any, out_dir: str, methods: list[str] | None = None) -> list[tuple[str, str]]:
    """Writes the graph of each root API method (default all) to ``out_dir/<method>``.

    Ops are named by component scope and graph function (``agent/policy/dense/_graph_fn_apply/MatMul``).
    On PyTorch the graph is traced by running each method once on sample inputs (state such as a
    memory may change; the command exits afterwards). Returns ``(method, outcome)`` pairs: the
    directory written, or why a method was left out.
    """
    assembly = executor.assembly
    out = []
    for name, api in executor.apis.items():
        if methods and name not in methods:
            continue
        directory = os.path.join(out_dir, name)
        try:
            if executor.backend_name == "tf":
                _export_tf(executor, assembly.traces[name], api, directory)
            else:
                _export_torch(executor, assembly.traces[name], api, directory)
            out.append((name, directory))
        except Exception as exc:  # noqa: BLE001 - one method that does not trace leaves the others
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            out.append((name, f"left out: {type(exc).__name__}: {first[:300]}"))
    return out


# ---- the command ----------------------------------------------------------------------------------


def cmd_graph(args: argparse.Namespace) -> int:
    from harness.graph.visualize import GraphvizMissing, write

    target = _load(args)
    fmt = args.format
    model = _model(target)
    if target.error is not None:
        if model is None:
            print(f"spacegraph graph: {args.target}: {type(target.error).__name__}: {target.error}", file=sys.stderr)
            return 2
        draw_fmt = "html" if fmt == "tensorboard" else fmt
        out = args.out if args.out and fmt != "tensorboard" else f"{target.name}-graph-failed.{draw_fmt}"
        try:
            path = write(model, draw_fmt, out)
        except GraphvizMissing as exc:
            path = write(model, "html", os.path.splitext(out)[0] + ".html")
            print(f"spacegraph graph: {exc}", file=sys.stderr)
        print(f"spacegraph graph: the build failed in {model.failed or 'the graph'}: {model.error}", file=sys.stderr)
        print(f"spacegraph graph: the graph as far as the build got (the failing component in red) is drawn "
              f"in {os.path.abspath(path)}", file=sys.stderr)
        return 1
    if fmt == "tensorboard":
        out_dir = args.out or f"{target.name}-tensorboard"
        import_tensorflow_quietly(getattr(args, "verbose_logs", False))  # torch.utils.tensorboard imports TensorFlow when it is there
        results = export_tensorboard(target.executor, out_dir, args.api)
        for method, outcome in results:
            print(f"  {method}: {outcome}")
        if not any(os.path.isdir(o) for _, o in results):
            print("spacegraph graph: no API method could be exported", file=sys.stderr)
            return 1
        print(f"spacegraph graph: wrote the TensorBoard graphs to {os.path.abspath(out_dir)}; open them with: "
              f"tensorboard --logdir {out_dir}  (then the Graphs tab, one run per API method)")
        return 0
    out = args.out or f"{target.name}-graph.{fmt}"
    try:
        path = write(model, fmt, out)
    except GraphvizMissing as exc:
        print(f"spacegraph graph: {exc}", file=sys.stderr)
        return 2
    print(f"spacegraph graph: wrote {os.path.abspath(path)} ({len(model.components)} components, "
          f"{len(model.edges)} API edges)")
    return 0


def add_graph_parser(sub: Any, verbose_help: str = VERBOSE_HELP) -> argparse.ArgumentParser:
    """Adds ``spacegraph graph`` to the command's sub-parsers.

    Args:
        sub: the sub-parsers of the `spacegraph` parser.
        verbose_help: the help of its ``--verbose`` flag.
    """
    graph = sub.add_parser(
        "graph", help="draw the built component graph (html, svg, png, dot) or export it to TensorBoard",
        description="Draws the built component graph: components nested by scope, API calls as edges labelled "
                    "with their input and output spaces, variables with shapes, colours by device. A build "
                    "error draws the graph as far as it got, the failing component in red, and exits 1.")
    graph.add_argument("target", help="a component spec file (specs/components/*.yaml), a component class path "
                                      "(package.module.Class, with --config/--space), or an agent config "
                                      "(a file or a name such as dqn_cartpole)")
    graph.add_argument("--backend", choices=["tf", "torch"], help="default: tf (an agent config's own backend)")
    graph.add_argument("--format", choices=FORMATS, default="html",
                       help="html (one self-contained file, default), svg/png (need Graphviz's dot), dot, or "
                            "tensorboard (a log directory)")
    graph.add_argument("--out", help="output file (a directory for tensorboard); default <name>-graph.<format>")
    graph.add_argument("--config", help="constructor keyword arguments as JSON (components)")
    graph.add_argument("--space", action="append", metavar="ARG=SPACE", help="input space of a root API argument")
    graph.add_argument("--api", action="append", metavar="METHOD", help="tensorboard: only these root API methods")
    graph.add_argument("--seed", type=int, default=None, help="seed of the build (default 0, or the config's)")
    graph.add_argument("--verbose", dest="verbose_logs", action="store_true", default=argparse.SUPPRESS,
                       help=verbose_help)
    graph.set_defaults(fn=cmd_graph)
    return graph
