"""`@api` declares a component's API methods (`forward` one that only forwards); `@graph_fn` its graph functions."""

from __future__ import annotations

import contextvars
import functools
import inspect
import types
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
    forwards: tuple[str, str] | None = None   # (sub-component attribute, its API method) for `forward`


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
        return _api_wrapper(f, spec)

    return wrap(fn) if fn is not None else wrap


def _api_wrapper(f: Callable, spec: ApiSpec) -> Callable:
    """The function `@api` puts on the class: it reports each call to the current assembler."""

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


_MISSING = object()


def forward(sub: str, target: Callable, *, must_be_complete: bool = True, doc: str | None = None) -> Any:
    """Declares an API method that only forwards to one sub-component's API method.

    ``get_size = forward("memory", ReplayMemory.get_size)`` in a class body is the
    hand-written ``@api def get_size(self): return self.memory.get_size()``: an
    `@api` method with the target's argument names and defaults, whose body calls
    ``self.<sub>.<method>`` with its arguments in order. The target is looked up on
    the instance at each assembly, so a copied (`Component.copy`) or swapped
    sub-component is the one called; it must have an API method of that name with
    the same argument names (else an `AssemblyError` naming both sides).

    Args:
        sub: the attribute holding the sub-component (``"memory"`` for ``self.memory``).
        target: the API method forwarded to, given on its class (``ReplayMemory.get_size``),
            so the arguments are known when the declaring class is created (the spec
            loader and `Component.api_specs` read them from the class).
        must_be_complete: as for `@api`.
        doc: the method's docstring (default: "Forwards to ..." and the target's first line).

    Raises:
        TypeError: when ``sub`` is not an attribute name or ``target`` is not an API method.
    """
    if not isinstance(sub, str) or not sub.isidentifier():
        raise TypeError(f"forward(sub, target): sub must be the name of the attribute holding the sub-component "
                        f"(e.g. 'memory'); got {sub!r}")
    spec = getattr(target, "_api_spec", None)
    if not isinstance(spec, ApiSpec):
        hint = (f"; pass the method itself, e.g. forward({sub!r}, SomeComponent.{target}), so that its arguments "
                f"are known when the class is created" if isinstance(target, str) else "")
        raise TypeError(f"forward({sub!r}, ...): the target must be an @api method given on its class; "
                        f"got {target!r}{hint}")
    return _Forward(sub, target, spec, must_be_complete, doc)


class _Forward:
    """What `forward` returns; ``__set_name__`` replaces it on the class with an `@api` method."""

    def __init__(self, sub: str, target: Callable, target_spec: ApiSpec, must_be_complete: bool,
                 doc: str | None) -> None:
        self.sub, self.target, self.target_spec = sub, target, target_spec
        self.must_be_complete, self.doc = must_be_complete, doc

    def __set_name__(self, owner: type, name: str) -> None:
        sub, method = self.sub, self.target_spec.name
        origin = getattr(self.target, "__qualname__", method)

        def body(component: Any, *args: Any) -> Any:
            return _forward_call(component, spec, origin, args)

        first = (inspect.getdoc(self.target) or "").split("\n")[0]
        body.__name__, body.__qualname__, body.__module__ = name, f"{owner.__qualname__}.{name}", owner.__module__
        body.__doc__ = self.doc or f"Forwards to ``self.{sub}.{method}``" + (f": {first}" if first else ".")
        body.__signature__ = _forward_signature(self.target)  # type: ignore[attr-defined]
        names, defaults = _arg_names(body, "api")
        spec = ApiSpec(name, body, names, defaults, self.must_be_complete, forwards=(sub, method))
        setattr(owner, name, _api_wrapper(body, spec))

    def __repr__(self) -> str:
        return f"forward({self.sub!r}, {getattr(self.target, '__qualname__', self.target)})"


def _forward_signature(target: Callable) -> inspect.Signature:
    """The forwarding method's signature: the target's own (``self``, argument names, defaults)."""
    return inspect.signature(target)


def _forward_call(component: Any, spec: ApiSpec, origin: str, args: tuple) -> Any:
    """The body of a `forward` method: checks the sub-component, then calls its API method."""
    sub, method = spec.forwards  # type: ignore[misc]
    where = (f"{type(component).__name__}({component.global_scope!r}).{spec.name}, declared "
             f"forward({sub!r}, {origin})")
    target = getattr(component, sub, _MISSING)
    if target is _MISSING:
        raise AssemblyError(f"{where}: the component has no attribute {sub!r}; its sub-components are "
                            f"{sorted(component.sub_components)} (name the attribute that holds one)")
    if not callable(getattr(target, "api_specs", None)):  # a Component (component.py imports this module)
        raise AssemblyError(f"{where}: self.{sub} is {type(target).__name__} {target!r}, not a Component")
    target_specs = target.api_specs()
    found = target_specs.get(method)
    if found is None:
        raise AssemblyError(f"{where}: {method!r} is not an API method of self.{sub}, "
                            f"{type(target).__name__}({target.global_scope!r}); its API methods are "
                            f"{sorted(target_specs)}")
    if found.arg_names != spec.arg_names:
        raise AssemblyError(f"{where}: argument mismatch: {spec.name} takes {list(spec.arg_names)} (from {origin}), "
                            f"but self.{sub}, {type(target).__name__}({target.global_scope!r}), has "
                            f"{method}({', '.join(found.arg_names)})")
    return getattr(target, method)(*args)


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

    @property
    def records(self) -> bool:
        """Whether a root API method reaching this function must run with gradient recording: it declares
        ``gradients``, or one of its bodies (or a function or lambda written inside one) calls
        ``F.value_and_grad``, which differentiates a loss it computes itself. A body calling ``value_and_grad``
        only through a helper defined elsewhere cannot be seen here: it must declare ``gradients=True``."""
        return self.gradients or any(_names_op(f, "value_and_grad") for f in (self.fn, *self.bodies.values()))


def _names_op(fn: Callable, op: str) -> bool:
    """Whether the code of ``fn``, or of a function or lambda defined inside it, names the attribute ``op``."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        if op in c.co_names:
            return True
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return False


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
