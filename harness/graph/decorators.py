"""`@api` declares a component's API methods; `@graph_fn` its graph functions."""

from __future__ import annotations

import contextvars
import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.graph.errors import AssemblyError

#: The assembler tracing the current root API call, or None outside assembly.
CURRENT_ASSEMBLER: contextvars.ContextVar[Any] = contextvars.ContextVar("spacegraph_assembler", default=None)


def _arg_names(fn: Callable, kind: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].name != "self":
        raise TypeError(f"@{kind} {fn.__qualname__}: the first parameter must be 'self'")
    params = params[1:]
    if kind == "graph_fn":
        if not params:
            raise TypeError(f"@graph_fn {fn.__qualname__}: the second parameter must be the op namespace 'F'")
        params = params[1:]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind == p.VAR_POSITIONAL else "**"
            raise TypeError(
                f"@{kind} {fn.__qualname__}: {star}{p.name} is not supported; take a named argument "
                f"and pass a tuple or dict of values (its space is then a Tuple or Dict)"
            )
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    return tuple(p.name for p in params), defaults


@dataclass(eq=False)
class ApiSpec:
    """What `@api` records about one API method."""

    name: str
    fn: Callable
    arg_names: tuple[str, ...]
    defaults: dict[str, Any]
    must_be_complete: bool = True


def api(fn: Callable | None = None, *, name: str | None = None, must_be_complete: bool = True) -> Any:
    """Declares an API method: the only way components call each other.

    API methods route values: they call sub-components' API methods and their own
    graph functions, and return what those returned. They run once per root API
    method during assembly, on abstract records; after the build, execution never
    passes through them.

    Args:
        name: the API name (default: the function's name).
        must_be_complete: whether the spaces of this method's arguments are needed
            before the component may create its variables (False for arguments such
            as a sample count that do not shape variables).
    """

    def wrap(f: Callable) -> Callable:
        names, defaults = _arg_names(f, "api")
        spec = ApiSpec(name or f.__name__, f, names, defaults, must_be_complete)

        @functools.wraps(f)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            assembler = CURRENT_ASSEMBLER.get()
            if assembler is None:
                raise AssemblyError(
                    f"{type(self).__name__}.{spec.name}() was called directly; API methods run during "
                    f"assembly only. Build the component (GraphExecutor or ComponentTest) and call "
                    f"executor.execute({spec.name!r}, ...)"
                )
            return assembler.call_api(self, spec, args, kwargs)

        wrapper._api_spec = spec  # type: ignore[attr-defined]
        return wrapper

    return wrap(fn) if fn is not None else wrap


@dataclass(eq=False)
class GraphFnSpec:
    """What `@graph_fn` records about one graph function."""

    name: str
    fn: Callable
    arg_names: tuple[str, ...]
    returns: int | Callable[[Any], int] = 1
    split: bool = False
    flatten: bool = False
    output_spaces: Callable | None = None
    gradients: bool = False
    bodies: dict[str, Callable] = field(default_factory=dict)

    def count(self, component: Any) -> int:
        """How many values the function returns for ``component`` (``returns`` may depend on it)."""
        n = self.returns(component) if callable(self.returns) else self.returns
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TypeError(f"graph function {type(component).__name__}.{self.name}: returns must give an int >= 0; "
                            f"got {n!r}")
        return n

    def body(self, backend: str) -> Callable:
        """The function to run on ``backend``: its own body if given, else the shared one."""
        return self.bodies.get(backend, self.fn)


class GraphFn:
    """The descriptor `@graph_fn` returns; ``.tf``/``.torch`` register backend-specific bodies.

    Backend-specific bodies exist for tests that need two backends to differ (e.g. the
    harness's deliberately broken components); library components are written once
    against ``F`` (suites/backends/test_components_backend_free.py enforces it).
    """

    def __init__(self, spec: GraphFnSpec) -> None:
        self.spec = spec
        functools.update_wrapper(self, spec.fn)

    def _register(self, backend: str, fn: Callable) -> "GraphFn":
        names, _ = _arg_names(fn, "graph_fn")
        if names != self.spec.arg_names:
            raise TypeError(
                f"@{self.spec.name}.{backend}: arguments {names} differ from the shared body's {self.spec.arg_names}"
            )
        self.spec.bodies[backend] = fn
        return self

    def tf(self, fn: Callable) -> "GraphFn":
        """Registers a TensorFlow-only body for this graph function."""
        return self._register("tf", fn)

    def torch(self, fn: Callable) -> "GraphFn":
        """Registers a PyTorch-only body for this graph function."""
        return self._register("torch", fn)

    def __set_name__(self, owner: type, name: str) -> None:
        self.spec.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        spec = self.spec

        def bound(*args: Any, **kwargs: Any) -> Any:
            assembler = CURRENT_ASSEMBLER.get()
            if assembler is None:
                raise AssemblyError(
                    f"graph function {type(obj).__name__}.{spec.name} was called outside assembly; "
                    f"graph functions run through the API methods of a built component"
                )
            return assembler.call_graph_fn(obj, spec, args, kwargs)

        return bound


def graph_fn(fn: Callable | None = None, *, returns: int | Callable[[Any], int] = 1, split: bool = False,
             flatten: bool = False, output_spaces: Callable | None = None, gradients: bool = False) -> Any:
    """Declares a graph function: the only code that touches tensors.

    The function takes ``(self, F, *inputs)`` where ``F`` is the backend's op
    namespace (`harness.backends.ops.Ops`), and is written once for both backends.

    Args:
        returns: how many values the function returns (0 for none, 1 for one value,
            which may be a nested dict/tuple of tensors, N for a tuple of N), or
            ``fn(self) -> int`` where the count depends on the instance.
        split: call the function once per leaf of the container inputs (all
            container inputs must share one structure; other inputs are passed
            whole) and re-nest each output by that structure.
        flatten: pass container inputs as flat dicts keyed by key paths; dict
            outputs keyed by the same paths are re-nested.
        output_spaces: ``fn(self, *input_spaces) -> space or tuple of spaces``,
            for functions whose output shapes cannot be inferred by running them
            on sample inputs (e.g. a shape that depends on input values).
        gradients: the function calls ``F.gradients(loss, variables)`` on a loss
            computed by earlier steps of the same API method; every root API
            method that reaches it then runs with gradient recording (a TF
            `GradientTape`, PyTorch autograd) instead of without.
    """

    def wrap(f: Callable) -> GraphFn:
        if not callable(returns) and returns < 0:
            raise TypeError(f"@graph_fn {f.__qualname__}: returns must be >= 0; got {returns}")
        names, _ = _arg_names(f, "graph_fn")
        spec = GraphFnSpec(f.__name__, f, names, returns, split, flatten, output_spaces, gradients)
        return GraphFn(spec)

    return wrap(fn) if fn is not None else wrap
