"""`Optimizer`: the base of components that update other components' trainable variables from a loss."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from harness.graph import BuildError, Component, api, graph_fn
from harness.spaces import FloatBox, Space


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def check_number(owner: str, argument: str, value: Any, low: float, high: float = float("inf"),
                 low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float if it is a number in the interval, else ValueError naming ``argument``.

    Args:
        owner: the class name for the message.
        argument: the constructor argument's name.
        value: the value to check.
        low: the interval's lower end.
        high: the interval's upper end.
        low_open: whether ``low`` itself is excluded.
        high_open: whether ``high`` itself is excluded.
    """
    ok = _is_number(value) and np.isfinite(value) and (value > low if low_open else value >= low) and (
        value < high if high_open else value <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{owner}: {argument} must be a number in {interval}; got {value!r}")
    return float(value)


def _is_trainable(var: Any) -> bool:
    # tf.Variable exposes `trainable`, a torch Parameter `requires_grad`; non-float torch
    # variables are plain tensors without gradients.
    flag = getattr(var, "trainable", None)
    return bool(getattr(var, "requires_grad", False) if flag is None else flag)


class Optimizer(Component):
    """Updates the trainable variables of other components so that a loss decreases.

    The optimizer's single API method, ``step(loss)``, takes a scalar loss
    computed by earlier steps of the same root API method (a root calls the
    network, then a loss, then ``optimizer.step(loss)``), differentiates it
    with respect to the target variables, optionally clips the gradients by
    their global norm and applies the subclass's update rule. It returns
    ``(loss, global_norm)``, the norm of all gradients together *before*
    clipping.

    Targets are the trainable floating-point variables of the components in
    ``variables_of`` and their sub-components, in scope-path order. Per-variable
    state (momentum, Adam's moments) lives in this optimizer's own
    non-trainable variables, named ``<path>/<slot>`` where ``<path>`` is the
    target variable's scope path relative to the root (a root ``agent`` with a
    variable ``agent/policy/dense/kernel`` and an SGD optimizer ``optimizer``
    gives ``agent/optimizer/policy/dense/kernel/momentum``). Slots start at zero
    and have their variable's shape and dtype.

    Global-norm clipping: with ``norm = sqrt(sum_i ||g_i||^2)`` over all target
    gradients, every gradient is scaled by ``c / max(norm, c)`` for
    ``clip_grad_norm = c``, i.e. left alone when ``norm <= c``.

    Subclasses set `slot_names` (or override it) and implement `_apply` (and
    `_create_extra_variables` for state that is not per variable).

    Args:
        learning_rate: the step size, a positive number.
        variables_of: a component or a non-empty list of components whose
            trainable variables this optimizer updates.
        clip_grad_norm: None (no clipping) or a positive global-norm threshold.
        scope: the component's name.

    Raises:
        ValueError: naming the argument and its value when one is invalid.
        BuildError: at build, when the components in ``variables_of`` have no
            trainable floating-point variables.
    """

    spec_exempt = "abstract base: specced through SGD, Adam and RMSProp"

    def __init__(self, learning_rate: float, variables_of: Component | Sequence[Component],
                 clip_grad_norm: float | None = None, scope: str = "optimizer") -> None:
        name = type(self).__name__
        lr = check_number(name, "learning_rate", learning_rate, 0.0, low_open=True)
        if clip_grad_norm is not None:
            clip_grad_norm = check_number(name, "clip_grad_norm", clip_grad_norm, 0.0, low_open=True)
        targets = [variables_of] if isinstance(variables_of, Component) else variables_of
        if not isinstance(targets, (list, tuple)) or not targets or \
                not all(isinstance(c, Component) for c in targets):
            raise ValueError(f"{name}: variables_of must be a Component or a non-empty list of Components; "
                             f"got {variables_of!r}")
        super().__init__(scope=scope)
        self.learning_rate = lr
        self.clip_grad_norm = clip_grad_norm
        self.targets: tuple[Component, ...] = tuple(targets)
        self.target_paths: list[str] = []
        self._vars: list[Any] = []
        self._dtypes: list[str] = []
        self.slots: dict[str, list[Any]] = {}

    def slot_names(self) -> tuple[str, ...]:
        """The per-variable slots this optimizer keeps (e.g. ``("m", "v")`` for Adam)."""
        return ()

    def variable_dependencies(self) -> list[Component]:
        """The components in ``variables_of``: their variables must exist first.

        A target that contains this optimizer (``variables_of=agent`` for the
        optimizer ``agent/optimizer``) is fine: the build waits for its other
        branches, not for the optimizer itself. Variables such an ancestor creates
        itself (not through sub-components) are not waited for.
        """
        return list(self.targets)

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """Accepts a ``loss`` that is a float scalar without batch or time rank (``float32[]``)."""
        space = input_spaces["loss"]
        if not (isinstance(space, FloatBox) and space.rank == 0 and not space.extra_ranks):
            raise self.space_mismatch("loss", "a float scalar without batch or time rank (float32[])", space,
                                      "reduce the loss to one number before the optimizer step")

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """Collects the target variables and creates one zero slot per target and slot name."""
        root = (self.ancestors() or [self])[-1]
        prefix = root.global_scope + "/"
        found: dict[str, Any] = {}
        for component in self.targets:
            for path, var in component.all_variables().items():
                _, dtype = self.backend.tensor_shape_dtype(var)
                if _is_trainable(var) and dtype.kind == "f":
                    found[path[len(prefix):] if path.startswith(prefix) else path] = var
        if not found:
            raise BuildError(
                f"{type(self).__name__} {self.global_scope!r}: variables_of "
                f"{[c.global_scope for c in self.targets]} has no trainable floating-point variables to update "
                f"(is every target trainable=False, or does no root API method use it?)"
            )
        self.target_paths = sorted(found)
        self._vars = [found[p] for p in self.target_paths]
        self._dtypes = [self.backend.tensor_shape_dtype(v)[1].name for v in self._vars]
        for slot in self.slot_names():
            self.slots[slot] = [
                self.get_variable(f"{path}/{slot}", self.backend.tensor_shape_dtype(var)[0], dtype, "zeros",
                                  trainable=False)
                for path, var, dtype in zip(self.target_paths, self._vars, self._dtypes)
            ]
        self._create_extra_variables()

    def _create_extra_variables(self) -> None:
        """Creates state that is not per target variable (e.g. a step counter)."""

    @api
    def step(self, loss: Any) -> Any:
        """Takes one optimization step on ``loss``; returns ``(loss, global_norm)`` (norm before clipping)."""
        return self._graph_fn_step(loss)

    @graph_fn(returns=2, gradients=True)
    def _graph_fn_step(self, F: Any, loss: Any) -> tuple[Any, Any]:
        norm = self._clip_and_apply(F, F.gradients(loss, self._vars))
        return F.stop_gradient(loss), norm

    def _clip_and_apply(self, F: Any, grads: list[Any]) -> Any:
        """Clips ``grads`` to the global norm ``clip_grad_norm`` (when set) and applies them (`_apply`); returns
        their global norm before clipping, in the first variable's dtype. Device strategies' optimizers call
        it with gradients reduced over replicas."""
        norm = F.global_norm(grads)
        if self.clip_grad_norm is not None:
            c = self.clip_grad_norm
            grads = F.scale_each(grads, c / F.maximum(norm, c))
        self._apply(F, grads)
        return norm

    def _apply(self, F: Any, grads: list[Any]) -> None:
        """Updates ``self._vars`` (and the slots) from the (clipped) gradients, with `F.assign`."""
        raise NotImplementedError(f"{type(self).__name__} must implement _apply")
