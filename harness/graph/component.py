"""`Component`: a named, scoped node of a component graph that owns sub-components and variables."""

from __future__ import annotations

import copy as _copy
import re
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from harness.graph.decorators import ApiSpec, GraphFn, GraphFnSpec
from harness.graph.errors import SpaceMismatchError

if TYPE_CHECKING:
    from harness.spaces import Space

_SCOPE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class Component:
    """A node of a component graph.

    Subclasses declare API methods with `@api` and graph functions with
    `@graph_fn`, and create their variables in `create_variables`, which runs once
    the spaces of their API arguments are known. Sub-components are added in the
    constructor (`add_components`); components call each other only through API
    methods.

    Args:
        *sub_components: components to add as children.
        scope: this component's name, unique among its siblings.
        device: a device name (``"/cpu:0"``, ``"cpu"``, ``"cuda:0"``) to place this
            component's variables and ops on; None inherits the executor's placement.
        trainable: whether this component's variables are trainable.
    """

    def __init__(self, *sub_components: "Component", scope: str, device: str | None = None,
                 trainable: bool = True) -> None:
        if not isinstance(scope, str) or not _SCOPE.match(scope):
            raise ValueError(
                f"{type(self).__name__}: scope must be a non-empty name of letters, digits, '_', '-' or '.'; "
                f"got {scope!r}"
            )
        self.scope = scope
        self.device = device
        self.trainable = trainable
        self.parent: Component | None = None
        self.sub_components: dict[str, Component] = {}
        # Filled by the build:
        self.input_spaces: dict[str, Space] | None = None
        self.variables: dict[str, Any] = {}
        self.backend: Any = None
        self.add_components(*sub_components)

    # ---- tree ----------------------------------------------------------------
    def add_components(self, *components: "Component") -> None:
        """Adds children; each component may have one parent and a unique scope among siblings."""
        for c in components:
            if not isinstance(c, Component):
                raise TypeError(f"{self.scope}: add_components takes Components; got {c!r}")
            if c.parent is not None:
                raise ValueError(
                    f"{self.scope}: component {c.scope!r} already belongs to {c.parent.global_scope!r}; "
                    f"use .copy(scope=...) for a second instance"
                )
            if c.scope in self.sub_components:
                raise ValueError(f"{self.scope}: a sub-component with scope {c.scope!r} exists already")
            if c is self or c in self.ancestors():
                raise ValueError(f"{self.scope}: adding {c.scope!r} would make a cycle")
            c.parent = self
            self.sub_components[c.scope] = c

    def ancestors(self) -> list["Component"]:
        """Parents up to the root, nearest first."""
        out, node = [], self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    @property
    def global_scope(self) -> str:
        """The scope path from the root, e.g. ``"agent/policy/dense"``."""
        return "/".join([c.scope for c in reversed(self.ancestors())] + [self.scope])

    def walk(self) -> Iterator["Component"]:
        """This component and all its descendants, breadth-first."""
        queue = [self]
        while queue:
            node = queue.pop(0)
            yield node
            queue.extend(node.sub_components.values())

    def sub_component(self, path: str) -> "Component":
        """A descendant by relative scope path (``"policy/dense"``)."""
        node = self
        for part in path.split("/"):
            if part not in node.sub_components:
                raise KeyError(f"{node.global_scope} has no sub-component {part!r}; it has {sorted(node.sub_components)}")
            node = node.sub_components[part]
        return node

    def effective_device(self) -> str | None:
        """This component's device, or the nearest ancestor's."""
        for c in [self] + self.ancestors():
            if c.device is not None:
                return c.device
        return None

    # ---- declarations ------------------------------------------------------------
    @classmethod
    def api_specs(cls) -> dict[str, ApiSpec]:
        """The API methods this class declares, by name."""
        cached = cls.__dict__.get("_spacegraph_api_specs")
        if cached is not None:
            return cached
        out: dict[str, ApiSpec] = {}
        for klass in reversed(cls.__mro__):
            for attr in vars(klass).values():
                spec = getattr(attr, "_api_spec", None)
                if isinstance(spec, ApiSpec):
                    out[spec.name] = spec
        cls._spacegraph_api_specs = out  # classes do not gain API methods after creation
        return out

    @classmethod
    def graph_fn_specs(cls) -> dict[str, GraphFnSpec]:
        """The graph functions this class declares, by name."""
        out: dict[str, GraphFnSpec] = {}
        for klass in reversed(cls.__mro__):
            for attr in vars(klass).values():
                if isinstance(attr, GraphFn):
                    out[attr.spec.name] = attr.spec
        return out

    # ---- hooks to override -----------------------------------------------------------
    def check_input_spaces(self, input_spaces: dict[str, "Space"]) -> None:
        """Raises `SpaceMismatchError` (see `space_mismatch`) for spaces this component rejects."""

    def create_variables(self, input_spaces: dict[str, "Space"]) -> None:
        """Creates this component's variables with `get_variable`, once its input spaces are known."""

    def variable_dependencies(self) -> list["Component"]:
        """Components whose variables must exist before this one builds.

        The build waits for each of them and for those of their descendants that
        take part in the root API (e.g. a `Synchronizer` waits for both networks).
        """
        return []

    # ---- helpers for subclasses -------------------------------------------------------
    def space_mismatch(self, argument: str, expected: Any, received: Any, detail: str = "") -> SpaceMismatchError:
        """An error naming this component, the argument, the expected and received space.

        The build adds the API method that received the argument.
        """
        return SpaceMismatchError(self.global_scope, None, argument, str(expected), str(received), detail)

    def get_variable(self, name: str, shape: tuple[int, ...] = (), dtype: str = "float32",
                     initializer: Any = "zeros", trainable: bool | None = None) -> Any:
        """Creates a backend variable under this component's scope (in `create_variables` only).

        Args:
            name: the variable's name within this component (its key is
                ``global_scope/name`` in weight dicts).
            shape: its shape, in the canonical layout (dense kernels ``(in, out)``,
                conv kernels ``(h, w, in, out)``).
            dtype: a NumPy dtype name.
            initializer: ``"zeros"``, ``"ones"``, ``"glorot_uniform"``,
                ``"normal(std)"``, ``"uniform(a)"``, a NumPy array, or
                ``fn(shape, rng) -> array``. Initial values are drawn in NumPy from
                the executor's seed, so both backends start from the same weights.
            trainable: defaults to the component's ``trainable``.
        """
        if self.backend is None:
            raise RuntimeError(f"{self.global_scope}: get_variable is only available inside create_variables")
        if name in self.variables:
            raise ValueError(f"{self.global_scope}: variable {name!r} exists already")
        path = f"{self.global_scope}/{name}"
        value = self.backend.initial_value(path, tuple(shape), np.dtype(dtype), initializer)
        var = self.backend.make_variable(path, value, self.trainable if trainable is None else trainable,
                                         self.effective_device())
        self.variables[name] = var
        return var

    def all_variables(self) -> dict[str, Any]:
        """This component's and its descendants' variables, keyed by global scope path."""
        out: dict[str, Any] = {}
        for c in self.walk():
            for name, var in c.variables.items():
                out[f"{c.global_scope}/{name}"] = var
        return out

    # ---- copying -----------------------------------------------------------------
    def copy(self, scope: str, device: str | None = None, trainable: bool | None = None) -> "Component":
        """An independent copy of this component and its sub-components under a new scope.

        Only before the build: target networks and device towers are made this way.
        """
        if self.backend is not None or self.variables:
            raise RuntimeError(f"{self.global_scope}: copy() is only possible before the build")
        parent = self.parent
        self.parent = None  # do not deep-copy the tree above
        try:
            new = _copy.deepcopy(self)
        finally:
            self.parent = parent
        if not _SCOPE.match(scope):
            raise ValueError(f"{type(self).__name__}.copy: bad scope {scope!r}")
        new.scope = scope
        if device is not None:
            new.device = device
        if trainable is not None:
            for c in new.walk():
                c.trainable = trainable
        return new

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scope={self.global_scope!r})"
