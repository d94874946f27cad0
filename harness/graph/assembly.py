"""Phase 2, assembly: trace each root API method once on abstract records."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import optree

from harness.graph.component import Component
from harness.graph.decorators import CURRENT_ASSEMBLER, ApiSpec, GraphFnSpec
from harness.graph.errors import AssemblyError
from harness.graph.partial import PartialBuild, attach, spaces_so_far
from harness.graph.records import ApiCall, GraphFnCall, Record


def _leaves(structure: Any) -> list[Any]:
    return optree.tree_leaves(structure, none_is_leaf=False)


@dataclass(eq=False)
class ApiTrace:
    """The flat trace of one root API method: its argument records, steps and outputs."""

    name: str
    arg_names: tuple[str, ...]
    args: dict[str, Record]
    constants: dict[str, Any]          # root arguments fixed to their default values
    steps: list[GraphFnCall] = field(default_factory=list)
    calls: list[ApiCall] = field(default_factory=list)
    outputs: Any = None                # nested structure of records (or None)

    @property
    def records(self) -> bool:
        """Whether the method runs with gradient recording: one of its steps needs it (`GraphFnSpec.records`)."""
        return any(step.spec.records for step in self.steps)


@dataclass(eq=False)
class Assembly:
    """The backend-free component graph and the API registry of one root component."""

    root: Component
    traces: dict[str, ApiTrace]

    def calls_to(self, component: Component) -> list[ApiCall]:
        """Every recorded call of one of ``component``'s API methods."""
        return [c for t in self.traces.values() for c in t.calls if c.component is component]

    def components(self) -> list[Component]:
        """Components that take part in at least one root API method, breadth-first."""
        used = {id(c.component) for t in self.traces.values() for c in t.calls}
        used |= {id(s.component) for t in self.traces.values() for s in t.steps}
        return [c for c in self.root.walk() if id(c) in used]

    def edges(self) -> list[tuple[str, str, str]]:
        """The component graph: ``(caller scope, callee scope, api method)`` triples."""
        out = []
        for t in self.traces.values():
            for c in t.calls:
                if c.caller is not None:
                    out.append((c.caller.global_scope, c.component.global_scope, c.method))
        return list(dict.fromkeys(out))


class Assembler:
    """Traces root API methods; API and graph-function wrappers report to it.

    While it works it knows what it has recorded (`traces`) and where it is (`current`); an
    exception escaping `assemble` gets a `PartialBuild` (``exc.partial_build``, see
    `harness.graph.partial`) naming the component whose API method or graph function was being
    traced when it was raised.
    """

    def __init__(self, root: Component) -> None:
        self.root = root
        self._members = {id(c) for c in root.walk()}
        self._stack: list[tuple[Component, str]] = []
        self._trace: ApiTrace | None = None
        self._traces: dict[str, ApiTrace] = {}
        # the innermost call an exception passed through: (exception, component, what it was doing)
        self._failure: tuple[BaseException, Component, str] | None = None

    @property
    def traces(self) -> dict[str, ApiTrace]:
        """The root API methods traced so far, the one being traced included (its calls and steps so far)."""
        return dict(self._traces)

    @property
    def current(self) -> tuple[Component, str] | None:
        """The component and API method being traced now (None outside a root API call)."""
        return self._stack[-1] if self._stack else None

    def partial(self, exc: BaseException | None = None) -> PartialBuild:
        """The assembly as far as it got; the failing component is the innermost one ``exc`` passed
        through (the root when it was raised outside any component's API method)."""
        failed, task = self.root, None
        if exc is not None and self._failure is not None and self._failure[0] is exc:
            _, failed, task = self._failure
        return PartialBuild(self.root, Assembly(self.root, self.traces), "assembly", spaces_so_far(self.root),
                            failed, [], task)

    def _note_failure(self, exc: BaseException, component: Component, task: str) -> None:
        if self._failure is None or self._failure[0] is not exc:  # the innermost call sees it first
            self._failure = (exc, component, task)

    def assemble(self, methods: list[str] | None = None, fixed: dict[str, Any] | None = None) -> Assembly:
        """Traces the named root API methods (default: all of them).

        Args:
            methods: root API methods to trace.
            fixed: argument names whose values are constants rather than inputs
                (root arguments with defaults are fixed unless they get a space).
        """
        specs = self.root.api_specs()
        if not specs:
            raise AssemblyError(f"{self.root.global_scope} ({type(self.root).__name__}) declares no @api methods")
        names = list(specs) if methods is None else list(methods)
        unknown = [m for m in names if m not in specs]
        if unknown:
            raise AssemblyError(
                f"{type(self.root).__name__} has no API method(s) {unknown}; registered: {sorted(specs)}"
            )
        self._traces, self._failure = {}, None
        try:
            for name in names:
                self._trace_root(specs[name], fixed or {})
        except Exception as exc:
            attach(exc, self.partial(exc))
            raise
        finally:
            self._failure = None  # no reference cycle through the exception's traceback
        return Assembly(self.root, self.traces)

    def _trace_root(self, spec: ApiSpec, fixed: dict[str, Any]) -> ApiTrace:
        args, constants = {}, {}
        for arg in spec.arg_names:
            if arg in fixed:
                constants[arg] = fixed[arg]
            else:
                args[arg] = Record(f"{spec.name}({arg})")
        trace = ApiTrace(spec.name, spec.arg_names, args, constants)
        self._trace = trace
        self._traces[spec.name] = trace
        token = CURRENT_ASSEMBLER.set(self)
        try:
            call_args = [args[a] if a in args else constants[a] for a in spec.arg_names]
            trace.outputs = self.call_api(self.root, spec, tuple(call_args), {})
        finally:
            CURRENT_ASSEMBLER.reset(token)
            self._trace = None
        return trace

    def _bind(self, component: Component, spec: Any, args: tuple, kwargs: dict, kind: str) -> dict[str, Any]:
        names = spec.arg_names
        where = f"{component.global_scope}.{spec.name}"
        if len(args) > len(names):
            raise AssemblyError(f"{kind} {where} takes {len(names)} argument(s) {list(names)}; got {len(args)}")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise AssemblyError(f"{kind} {where} has no argument {k!r}; its arguments are {list(names)}")
            if k in bound:
                raise AssemblyError(f"{kind} {where} got argument {k!r} twice")
            bound[k] = v
        defaults = getattr(spec, "defaults", {})
        missing = [n for n in names if n not in bound and n not in defaults]
        if missing:
            raise AssemblyError(f"{kind} {where} is missing argument(s) {missing}")
        return {n: bound[n] if n in bound else defaults[n] for n in names}

    def call_api(self, component: Component, spec: ApiSpec, args: tuple, kwargs: dict) -> Any:
        """Records a call of ``component.spec`` and runs its body on records."""
        trace = self._trace
        assert trace is not None
        caller = self._stack[-1][0] if self._stack else None
        try:
            if id(component) not in self._members:
                raise AssemblyError(
                    f"{caller.global_scope if caller else 'the root'} calls {type(component).__name__}"
                    f"({component.scope!r}).{spec.name}, which is not a sub-component of the root "
                    f"{self.root.global_scope!r}; add it with add_components()"
                )
            bound = self._bind(component, spec, args, kwargs, "API method")
            call = ApiCall(component, spec.name, bound, caller=caller)
            trace.calls.append(call)
            self._stack.append((component, spec.name))
            try:
                outputs = spec.fn(component, *bound.values())
            finally:
                self._stack.pop()
            for leaf in _leaves(outputs):
                if not isinstance(leaf, Record):
                    raise AssemblyError(
                        f"API method {component.global_scope}.{spec.name} returned {type(leaf).__name__} {leaf!r}; "
                        f"API methods return what their graph functions and sub-components' API methods returned"
                    )
        except Exception as exc:
            self._note_failure(exc, component, f"API method {component.global_scope}.{spec.name}")
            raise
        call.outputs = outputs
        return outputs

    def call_graph_fn(self, component: Component, spec: GraphFnSpec, args: tuple, kwargs: dict) -> Any:
        """Records one graph-function call and returns records for its outputs."""
        try:
            return self._record_graph_fn(component, spec, args, kwargs)
        except Exception as exc:
            self._note_failure(exc, component, f"graph function {component.global_scope}.{spec.name}")
            raise

    def _record_graph_fn(self, component: Component, spec: GraphFnSpec, args: tuple, kwargs: dict) -> Any:
        owner = self._stack[-1] if self._stack else None
        if owner is None or owner[0] is not component:
            via = sys._getframe(3).f_code.co_name
            caller = f"{owner[0].global_scope}.{owner[1]}" if owner else "code outside any API method"
            raise AssemblyError(
                f"{caller} calls graph function {type(component).__name__}({component.global_scope!r})."
                f"{spec.name} (via {via}()), which is not an API method of that component; components talk "
                f"to each other only through API methods"
            )
        bound = self._bind(component, spec, args, kwargs, "graph function")
        try:
            count = spec.count(component)
        except TypeError as exc:
            raise AssemblyError(str(exc)) from None
        outputs = [Record(f"{component.global_scope}.{spec.name}[{i}]") for i in range(count)]
        step = GraphFnCall(component, spec, tuple(bound.values()), outputs, tuple(self._stack))
        assert self._trace is not None
        self._trace.steps.append(step)
        if count == 0:
            return None
        if count == 1:
            return outputs[0]
        return tuple(outputs)


def assemble(root: Component, methods: list[str] | None = None, fixed: dict[str, Any] | None = None) -> Assembly:
    """Phase 2: traces ``root``'s API methods into a backend-free `Assembly`."""
    return Assembler(root).assemble(methods, fixed)
