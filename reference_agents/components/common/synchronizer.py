"""`Synchronizer`: copies (or softly blends) one component's variables into another's."""

from __future__ import annotations

from typing import Any

from harness.graph import BuildError, Component, api, graph_fn
from harness.spaces import Space


def _relative_variables(component: Component) -> dict[str, Any]:
    prefix = component.global_scope + "/"
    return {path[len(prefix):]: var for path, var in component.all_variables().items()}


class Synchronizer(Component):
    """Copies the variables of ``source`` into ``target``, e.g. a Q-network into its target network.

    Variables are matched by their scope path relative to each component
    (``target = source.copy(scope=...)`` matches by construction). With
    ``tau < 1`` the update is soft: ``target = tau * source + (1 - tau) * target``.

    The synchronizer only references ``source`` and ``target``; it must sit in
    the same component tree as both (typically as their sibling under the
    agent root), and some root API method must use both, or the build stops
    saying that the synchronizer waits for their variables. Its API method
    `sync` takes no inputs and returns nothing.

    Args:
        source: the component whose variables are read.
        target: the component whose variables are overwritten.
        tau: the blend factor, ``0 < tau <= 1`` (1 copies).
        scope: the component's name.

    Raises:
        ValueError: when source or target is not a component, they are the same
            component, or ``tau`` lies outside ``(0, 1]``.
        BuildError: at build, naming both components and the differing keys,
            when their variables differ in names, shapes or dtypes.
    """

    def __init__(self, source: Component, target: Component, tau: float = 1.0,
                 scope: str = "synchronizer") -> None:
        for name, comp in (("source", source), ("target", target)):
            if not isinstance(comp, Component):
                raise ValueError(f"Synchronizer: {name} must be a Component; got {comp!r}")
        if source is target:
            raise ValueError(f"Synchronizer: source and target must differ; got {source!r} for both")
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0.0 < tau <= 1.0:
            raise ValueError(f"Synchronizer: tau must be a number in (0, 1]; got {tau!r}")
        super().__init__(scope=scope)
        self.source = source
        self.target = target
        self.tau = float(tau)
        self._pairs: list[tuple[Any, Any]] = []

    def variable_dependencies(self) -> list[Component]:
        """``source`` and ``target``: the build waits for them and their used sub-components."""
        return [self.source, self.target]

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Pairs the source's variables with the target's; raises BuildError where they differ."""
        where = f"Synchronizer {self.global_scope!r}"
        src, tgt = _relative_variables(self.source), _relative_variables(self.target)
        only_src, only_tgt = sorted(set(src) - set(tgt)), sorted(set(tgt) - set(src))
        shapes, backend = {}, self.backend
        for key in sorted(set(src) & set(tgt)):
            s_shape, s_dtype = backend.tensor_shape_dtype(src[key])
            t_shape, t_dtype = backend.tensor_shape_dtype(tgt[key])
            if (s_shape, s_dtype) != (t_shape, t_dtype):
                shapes[key] = f"{s_dtype.name}{list(s_shape)} vs {t_dtype.name}{list(t_shape)}"
        if only_src or only_tgt or shapes:
            raise BuildError(
                f"{where}: the variables of source {self.source.global_scope!r} and target "
                f"{self.target.global_scope!r} differ: only in source {only_src}, only in target {only_tgt}, "
                f"shapes/dtypes differ {shapes}"
            )
        if not src:
            raise BuildError(f"{where}: source {self.source.global_scope!r} has no variables to copy into "
                             f"target {self.target.global_scope!r}")
        self._pairs = [(src[key], tgt[key]) for key in sorted(src)]

    @api
    def sync(self) -> None:
        """Copies (or, with ``tau < 1``, blends) the source's variables into the target's."""
        return self._graph_fn_sync()

    @graph_fn(returns=0)
    def _graph_fn_sync(self, F: Any) -> None:
        for source, target in self._pairs:
            value = source if self.tau == 1.0 else self.tau * source + (1.0 - self.tau) * target
            F.assign(target, value)
