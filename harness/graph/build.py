"""Phase 3, build: input spaces flow from the root API; components build when input-complete."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import optree

from harness.graph.assembly import Assembly
from harness.graph.component import Component
from harness.graph.errors import BuildError, SpaceMismatchError, SpacegraphError
from harness.graph.partial import PartialBuild, attach, spaces_so_far
from harness.graph.records import GraphFnCall, Record, records_in
from harness.graph.steps import host_step, make_step
from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Space, Tuple, parse

# Sizes of the batch and time ranks in the two sample runs; the dimensions that change
# between the runs are the extra ranks of an output.
_RUNS = ({"B": 2, "T": 3}, {"B": 3, "T": 5})


@dataclass
class BuildProfile:
    """Where the build's time went, in seconds.

    ``framework_overhead`` is what spacegraph itself costs: assembly plus the build
    minus backend variable creation and op creation (running graph functions on
    sample inputs, tracing/compiling API functions).
    """

    assembly: float = 0.0
    build_total: float = 0.0
    variable_creation: float = 0.0
    op_creation: float = 0.0
    components: int = 0
    graph_fn_calls: int = 0   # graph functions run on sample inputs to infer their output spaces (declared ones are not)
    variables: int = 0
    host_steps: int = 0   # graph-function steps some API method runs on the host (`harness.graph.steps.host_step`)

    @property
    def build_overhead(self) -> float:
        """Build time not spent in backend variable or op creation."""
        return max(0.0, self.build_total - self.variable_creation - self.op_creation)

    @property
    def framework_overhead(self) -> float:
        """Assembly plus build overhead."""
        return self.assembly + self.build_overhead

    def as_dict(self) -> dict[str, float | int]:
        """All figures, including the derived ones."""
        return {"assembly_s": self.assembly, "build_total_s": self.build_total,
                "variable_creation_s": self.variable_creation, "op_creation_s": self.op_creation,
                "build_overhead_s": self.build_overhead, "framework_overhead_s": self.framework_overhead,
                "components": self.components, "graph_fn_calls": self.graph_fn_calls, "variables": self.variables,
                "host_steps": self.host_steps}


@dataclass(eq=False)
class BuiltApi:
    """One root API method after the build."""

    name: str
    arg_spaces: dict[str, Space]
    constants: dict[str, Any]
    output_space: Any                    # nested structure of spaces (or None)
    chain: Any = None                    # the flat Python call chain
    fn: Any = None                       # the backend-compiled callable
    source: str = ""


@dataclass(eq=False)
class BuiltGraph:
    """The result of the build: compiled API methods, components and the profile."""

    root: Component
    apis: dict[str, BuiltApi]
    components: list[Component]
    profile: BuildProfile = field(default_factory=BuildProfile)


def _space_of(structure: Any) -> Space | None:
    """The space of an argument: a record's space, or a Dict/Tuple of nested records' spaces."""
    if isinstance(structure, Record):
        return structure.space
    if isinstance(structure, dict):
        return Dict({k: _space_of(v) for k, v in structure.items()})
    if isinstance(structure, (tuple, list)):
        return Tuple([_space_of(v) for v in structure])
    return None


class Builder:
    """Runs phase 3 for one assembly on one backend.

    While it works, `current` is the component it is working on (its input spaces, its
    ``check_input_spaces``/``create_variables``, or one of its graph functions on sample inputs)
    and `current_task` says which; both stay set when that work raises. An exception escaping
    `assign_root_spaces` or `run` gets ``exc.partial_build`` (see `partial` and
    `harness.graph.partial`), the exception itself unchanged.
    """

    def __init__(self, assembly: Assembly, backend: Any) -> None:
        self.assembly = assembly
        self.current: Component | None = None
        self.current_task: str | None = None
        self.backend = backend
        self.profile = BuildProfile()
        self.rng = np.random.default_rng(backend.seed)
        self._probe_rng = np.random.default_rng([backend.seed, 1])   # host_step's probes: self.rng's draws stay as they were
        self.producer: dict[int, GraphFnCall] = {}
        for trace in assembly.traces.values():
            for step in trace.steps:
                for r in step.outputs:
                    self.producer[r.id] = step
        self.step_fns: dict[int, Any] = {}
        # the steps that may run on the host (`harness.graph.steps.host_step`), each one's host callable; the
        # chains of API methods that record gradients keep the backend's (`harness.graph.chain.build_chain`)
        self.host_fns: dict[int, Any] = {}
        self.calls: dict[int, list] = {}
        for trace in assembly.traces.values():
            for call in trace.calls:
                self.calls.setdefault(id(call.component), []).append(call)

    # ---- what it is working on ---------------------------------------------------------
    @contextlib.contextmanager
    def _working_on(self, comp: Component, task: str) -> Iterator[None]:
        """Sets `current` for the block; an exception leaves it set (the failing component)."""
        self.current, self.current_task = comp, task
        yield
        self.current = self.current_task = None

    def partial(self) -> PartialBuild:
        """The build as far as it got: the failing component is `current`; with none, a stuck
        build's components that still lack input spaces are ``stuck``, and when there are none
        (the components were all built: a later step failed, such as compiling) the root failed."""
        assembly, failed, stuck = self.assembly, self.current, []
        if failed is None:
            for comp in assembly.components():
                if comp.input_spaces is None:
                    try:
                        _, missing = self.component_spaces(comp)
                    except Exception:  # noqa: BLE001 - a space mismatch: then it is this one
                        missing = [None]
                    if missing:
                        stuck.append(comp)
            if not stuck:
                failed = assembly.root
        return PartialBuild(assembly.root, assembly, "build", spaces_so_far(assembly.root), failed, stuck,
                            self.current_task if failed is self.current else None)

    def _attach_partial(self, exc: BaseException) -> None:
        attach(exc, self.partial())

    # ---- input spaces of the root API ------------------------------------------------
    def assign_root_spaces(self, input_spaces: dict[str, Any]) -> None:
        """Gives the root API's argument records their spaces (``{argument: space or space text}``)."""
        try:
            self._assign_root_spaces(input_spaces)
        except Exception as exc:
            self._attach_partial(exc)
            raise

    def _assign_root_spaces(self, input_spaces: dict[str, Any]) -> None:
        known = {a for t in self.assembly.traces.values() for a in t.args}
        unknown = sorted(set(input_spaces) - known - {a for t in self.assembly.traces.values() for a in t.constants})
        if unknown:
            raise BuildError(f"input spaces given for unknown root API argument(s) {unknown}; "
                             f"the root API takes {sorted(known)}")
        missing = [f"{t.name}({a})" for t in self.assembly.traces.values() for a in t.args if a not in input_spaces]
        if missing:
            raise BuildError(
                f"no input space for root API argument(s) {', '.join(missing)} of "
                f"{type(self.assembly.root).__name__}; pass input_spaces={{name: space}} for each, "
                f"or build only some API methods (api_methods=[...])"
            )
        for trace in self.assembly.traces.values():
            for arg, record in trace.args.items():
                value = input_spaces[arg]
                try:
                    record.space = parse(value)
                except ValueError as exc:
                    raise BuildError(f"input space for root API argument {trace.name}({arg}): {exc}") from None

    # ---- input completeness ------------------------------------------------------------
    def component_spaces(self, comp: Component) -> tuple[dict[str, Space], list[tuple[str, str, Record]]]:
        """Known argument spaces of ``comp`` and the required records still lacking one."""
        spaces: dict[str, Space] = {}
        first_method: dict[str, str] = {}
        missing = []
        api_specs = comp.api_specs()
        for call in self.calls.get(id(comp), []):
            required = api_specs[call.method].must_be_complete
            for arg, value in call.args.items():
                recs = records_in(value)
                if not recs:
                    continue
                lacking = [r for r in recs if r.space is None]
                if lacking:
                    if required:
                        missing.extend((call.method, arg, r) for r in lacking)
                    continue
                space = _space_of(value)
                if arg in spaces and spaces[arg] != space:
                    raise SpaceMismatchError(
                        comp.global_scope, call.method, arg, repr(spaces[arg]), repr(space),
                        f"argument {arg!r} already received {spaces[arg]!r} in API method "
                        f"{first_method[arg]!r}; one argument name takes one space per component",
                    )
                spaces.setdefault(arg, space)
                first_method.setdefault(arg, call.method)
        self._first_method = first_method
        return spaces, missing

    def _method_of(self, comp: Component, argument: str) -> str | None:
        """The API method of ``comp`` that first received ``argument``; else the first called one whose
        signature has it; else None (the error then reads ``component argument 'x'``)."""
        first = getattr(self, "_first_method", {})
        if argument in first:
            return first[argument]
        specs = comp.api_specs()
        for call in self.calls.get(id(comp), []):
            if argument in specs[call.method].arg_names:
                return call.method
        return None

    def build_component(self, comp: Component, spaces: dict[str, Space]) -> None:
        with self._working_on(comp, "check_input_spaces/create_variables"):
            self._build_component(comp, spaces)

    def _build_component(self, comp: Component, spaces: dict[str, Space]) -> None:
        comp.input_spaces = spaces
        comp.backend = self.backend
        try:
            comp.check_input_spaces(spaces)
            start = time.perf_counter()
            with self.backend.device_scope(comp.effective_device()):
                comp.create_variables(spaces)
            self.profile.variable_creation += time.perf_counter() - start
        except SpaceMismatchError as exc:
            if exc.method is None:
                method, detail = self._method_of(comp, exc.argument), exc.detail
                if exc.argument not in getattr(self, "_first_method", {}):  # the argument was not fed: say by which calls
                    called = sorted({c.method for c in self.calls.get(id(comp), [])})
                    note = (f"no call passed '{exc.argument}' (API method(s) called: {', '.join(called)})"
                            if called else f"'{exc.argument}' was not passed")
                    detail = f"{detail}; {note}" if detail else note
                raise SpaceMismatchError(exc.component, method, exc.argument, exc.expected, exc.received,
                                         detail) from None
            raise
        except SpacegraphError:
            raise
        except Exception as exc:
            raise BuildError(
                f"{type(comp).__name__} {comp.global_scope!r} failed to create its variables for input spaces "
                f"{spaces}: {type(exc).__name__}: {exc}"
            ) from exc

    # ---- running steps on samples ------------------------------------------------------------
    def _sample(self, structure: Any, sizes: dict[str, int]) -> Any:
        def one(x: Any) -> Any:
            if not isinstance(x, Record):
                return x
            return optree.tree_map(self.backend.to_tensor, x.space.sample(
                tuple(sizes[r] for r in x.space.extra_ranks) or None, self.rng))
        return optree.tree_map(one, structure, none_is_leaf=True)

    def run_step(self, step: GraphFnCall) -> None:
        with self._working_on(step.component, f"graph function {step.where}"):
            self._run_step(step)

    def _run_step(self, step: GraphFnCall) -> None:
        arg_spaces = [_space_of(a) for a in step.args]
        fn = make_step(step, self.backend, arg_spaces)
        self.step_fns[id(step)] = fn
        self._infer_outputs(step, fn, arg_spaces)
        if step.outputs and all(rec.space is not None for rec in step.outputs):
            on_host = host_step(step, self.backend, arg_spaces, [rec.space for rec in step.outputs], fn,
                                self._probe_rng)
            if on_host is not None:
                self.host_fns[id(step)] = on_host

    def _infer_outputs(self, step: GraphFnCall, fn: Any, arg_spaces: list[Space | None]) -> None:
        spec = step.spec
        if spec.output_spaces is not None:
            try:
                out = spec.output_spaces(step.component, *arg_spaces)
            except Exception as exc:
                raise BuildError(f"output_spaces of graph function {step.where} failed for input spaces "
                                 f"{arg_spaces}: {type(exc).__name__}: {exc}") from exc
            outs = [out] if len(step.outputs) == 1 else list(out or ())
            for rec, space in zip(step.outputs, outs):
                rec.space = parse(space)
            return
        results = []
        for sizes in _RUNS:
            start = time.perf_counter()
            inputs = [self._sample(a, sizes) for a in step.args]
            try:
                with self.backend.device_scope(step.component.effective_device()):
                    results.append(fn(*inputs))
            except SpacegraphError:
                raise
            except Exception as exc:
                spaces = ", ".join(f"{n}={s!r}" for n, s in zip(spec.arg_names, arg_spaces))
                raise BuildError(f"graph function {step.where} failed on inputs with spaces ({spaces}): "
                                 f"{type(exc).__name__}: {exc}") from exc
            finally:
                self.profile.op_creation += time.perf_counter() - start
        self.profile.graph_fn_calls += 1
        count = len(step.outputs)
        if count == 0:
            return
        per_run = []
        for res in results:
            if count == 1:
                per_run.append([res])
            elif isinstance(res, (tuple, list)) and len(res) == count:
                per_run.append(list(res))
            else:
                got = f"{type(res).__name__} of length {len(res)}" if isinstance(res, (tuple, list)) else type(res).__name__
                raise BuildError(f"graph function {step.where} declares returns={count} but returned {got}")
        for i, rec in enumerate(step.outputs):
            rec.space = self._infer_space(step, i, per_run[0][i], per_run[1][i])

    def _infer_space(self, step: GraphFnCall, index: int, first: Any, second: Any) -> Space:
        paths, leaves1, treespec = optree.tree_flatten_with_path(first, none_is_leaf=True)
        leaves2 = optree.tree_leaves(second, none_is_leaf=True)
        spaces = []
        for path, a, b in zip(paths, leaves1, leaves2):
            where = f"output {index}" + (f" at {'/'.join(map(str, path))!r}" if path else "")
            if not self.backend.is_tensor(a):
                raise BuildError(
                    f"graph function {step.where} returned {type(a).__name__} {a!r} as {where}; graph functions "
                    f"must return {self.backend.name} tensors (or dicts/tuples of them)"
                )
            (shape1, dtype), (shape2, _) = self.backend.tensor_shape_dtype(a), self.backend.tensor_shape_dtype(b)
            spaces.append(self._leaf_space(step, where, shape1, shape2, dtype))
        return _as_space(treespec.unflatten(spaces))

    def _leaf_space(self, step: GraphFnCall, where: str, s1: tuple, s2: tuple, dtype: np.dtype) -> Space:
        if len(s1) != len(s2):
            raise BuildError(f"graph function {step.where}: {where} changes rank with the batch size ({s1} vs {s2}); "
                             f"declare output_spaces")
        varying = [i for i, (a, b) in enumerate(zip(s1, s2)) if a != b]
        if varying and varying != list(range(len(varying))) or len(varying) > 2:
            raise BuildError(
                f"graph function {step.where}: {where} has dimensions {varying} that follow the batch/time size "
                f"(shapes {s1} and {s2}); only leading batch/time ranks are supported; declare output_spaces"
            )
        kinds = []
        for i in varying:
            pair = (s1[i], s2[i])
            kinds.append("T" if pair == (_RUNS[0]["T"], _RUNS[1]["T"]) else "B" if pair == (_RUNS[0]["B"], _RUNS[1]["B"]) else "?")
        if len(kinds) == 2:
            time_major = kinds[0] == "T" and kinds[1] != "T"
            if kinds.count("T") != 1:
                raise BuildError(f"graph function {step.where}: cannot tell batch from time rank in {where} "
                                 f"(shapes {s1} and {s2}); declare output_spaces")
            ranks = dict(batch_rank=True, time_rank=True, time_major=time_major)
        elif kinds == ["T"]:
            ranks = dict(batch_rank=False, time_rank=True)
        elif kinds:
            ranks = dict(batch_rank=True, time_rank=False)  # a batch, or batch and time folded into one
        else:
            ranks = {}
        core = tuple(s1[len(varying):])
        if dtype.kind == "f":
            return FloatBox(core, dtype=dtype, **ranks)
        if dtype.kind in "iu":
            return IntBox(shape=core, dtype=dtype, **ranks)
        if dtype.kind == "b":
            return BoolBox(core, **ranks)
        raise BuildError(f"graph function {step.where}: {where} has unsupported dtype {dtype}")

    # ---- the loop ------------------------------------------------------------------------------
    def run(self) -> list[Component]:
        """Builds every component and runs every step on samples; returns the components built."""
        try:
            return self._run()
        except Exception as exc:
            self._attach_partial(exc)
            raise

    def _run(self) -> list[Component]:
        comps = self.assembly.components()
        pending_comps = list(comps)
        self._used = {id(c) for c in comps}
        steps = [s for t in self.assembly.traces.values() for s in t.steps]
        pending = list(steps)
        built: set[int] = set()
        while pending or pending_comps:
            progress = False
            for comp in list(pending_comps):
                with self._working_on(comp, "input spaces"):
                    spaces, missing = self.component_spaces(comp)
                deps = self._dependencies(comp)
                if missing or any(id(d) not in built for d in deps):
                    continue
                self.build_component(comp, spaces)
                built.add(id(comp))
                pending_comps.remove(comp)
                progress = True
            for step in list(pending):
                if id(step.component) not in built:
                    continue
                if any(r.space is None for a in step.args for r in records_in(a)):
                    continue
                self.run_step(step)
                pending.remove(step)
                progress = True
            if not progress:
                raise BuildError(self._stuck_report(pending_comps, pending, built))
        self.profile.components = len(comps)
        return comps

    def _dependencies(self, comp: Component) -> list[Component]:
        """The components ``comp`` waits for: its variable dependencies and their used descendants.

        ``comp`` itself and its ancestors are never waited for: an optimizer over the
        whole agent that holds it waits for the agent's other branches, not for itself
        (variables an ancestor creates directly are then not guaranteed to exist).
        """
        chain = {id(comp)} | {id(a) for a in comp.ancestors()}
        return [d for dep in comp.variable_dependencies() for d in dep.walk()
                if (d is dep or id(d) in self._used) and id(d) not in chain]

    def _stuck_report(self, comps: list[Component], steps: list[GraphFnCall], built: set[int]) -> str:
        lines = ["the build cannot go on; these components are not input-complete:"]
        for comp in comps:
            _, missing = self.component_spaces(comp)
            for method, arg, rec in missing:
                src = self.producer.get(rec.id)
                origin = (f"it comes from graph function {src.where}, which is not built yet" if src
                          else "no space reaches it")
                lines.append(f"  - {comp.global_scope}: argument {arg!r} of API method {method!r} has no space ({origin})")
            for dep in self._dependencies(comp):
                if id(dep) not in built:
                    lines.append(f"  - {comp.global_scope}: waits for the variables of {dep.global_scope}")
        lines.append("an argument that does not shape the component's variables can be declared "
                     "@api(must_be_complete=False)")
        return "\n".join(lines)

    def restore_initial_values(self) -> None:
        """Undoes what the sample runs did to variables (memories, counters, ...)."""
        start = time.perf_counter()
        for comp in self.assembly.components():
            for name, var in comp.variables.items():
                self.backend.assign_variable(var, self.backend.initial_values[f"{comp.global_scope}/{name}"])
        self.backend.reset_rng()
        self.profile.variable_creation += time.perf_counter() - start


def _as_space(value: Any) -> Space:
    if isinstance(value, Space):
        return value
    if isinstance(value, dict):
        return Dict({k: _as_space(v) for k, v in value.items()})
    return Tuple([_as_space(v) for v in value])
