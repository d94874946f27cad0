"""The stateful check: a hypothesis state machine runs a component and its NumPy model side by side."""

from __future__ import annotations

import copy
from typing import Any, Callable

from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from harness.specs import LoadedSpec
from harness.testing.spec_checks import (
    Built, built, compare_outputs, describe_value, example_count, fail, hypothesis_settings, input_strategy,
    method_args, relative_weights, tolerance,
)

__all__ = ["check_stateful", "state_machine"]


def state_machine(spec: LoadedSpec, backend: str) -> type[RuleBasedStateMachine]:
    """A `RuleBasedStateMachine` class with one rule per method in ``spec.stateful.methods``.

    Each run starts from the built executor's initial weights (variables hold all
    state, so the executor is built once, not per run) and a new model
    ``model(config, weights_relative)``. A rule draws inputs from its method's
    argument spaces, calls the component and ``model.<method>(**inputs)`` and
    checks that they agree within the method's tolerance. A model with a
    ``weights()`` method (relative key -> array) has the component's variables
    compared with it after every step too.

    Raises:
        SpecCheckError: when the build fails or a listed method is not built.
    """
    sspec = spec.spec.stateful
    assert sspec is not None and spec.stateful_model is not None
    b = built(spec, backend)
    unbuilt = [m for m in sspec.methods if m not in b.executor.apis]
    if unbuilt:
        raise fail(spec, "stateful", backend, f"stateful.methods {unbuilt} are not under methods: list them there "
                   f"(with stateful: true where they change state) so they are built")
    weights = b.relative_weights()
    scope = b.executor.root.global_scope
    model_cls = spec.stateful_model

    def init(self: Any) -> None:
        RuleBasedStateMachine.__init__(self)
        b.restore()
        self.model = model_cls(copy.deepcopy(spec.spec.config), copy.deepcopy(weights))
        self.steps = 0

    namespace: dict[str, Any] = {"__init__": init, "_hypothesis_internal_add_digest":
                                 f"{spec.path}::stateful/{backend}".encode()}
    for method in sspec.methods:
        name = method if not hasattr(RuleBasedStateMachine, method) else f"api_{method}"
        namespace[name] = rule(inputs=input_strategy(spec, method_args(b, method)))(
            _step(spec, backend, b, method, scope, name))
    return type(f"{spec.name}_{backend}_machine", (RuleBasedStateMachine,), namespace)


def _step(spec: LoadedSpec, backend: str, b: Built, method: str, scope: str, name: str) -> Callable:
    tol = tolerance(spec, method)
    model_path = spec.spec.stateful.model  # type: ignore[union-attr]

    def step(self: Any, inputs: dict[str, Any]) -> None:
        self.steps += 1
        outputs = b.call(method, inputs)
        expected = getattr(self.model, method)(**copy.deepcopy(inputs))
        diff = compare_outputs(outputs, expected, tol)
        where = f"step {self.steps}, method {method!r}"
        if diff:
            raise fail(spec, "stateful", backend, f"{where}: the component disagrees with the model {model_path}: "
                       f"{diff}\n  inputs:\n{describe_value(inputs)}")
        model_weights = getattr(self.model, "weights", None)
        if callable(model_weights):
            expected_w = model_weights()
            actual_w = relative_weights(b.executor.get_weights(), scope)
            diff = compare_outputs({k: actual_w.get(k) for k in expected_w}, expected_w, tol)
            if diff:
                raise fail(spec, "stateful", backend, f"{where}: the component's variables disagree with the "
                           f"model's weights(): {diff}\n  inputs:\n{describe_value(inputs)}")

    step.__name__ = step.__qualname__ = name
    return step


def check_stateful(spec: LoadedSpec, backend: str) -> None:
    """Runs the spec's state machine for the scaled example count, ``stateful.steps`` steps per run."""
    machine = state_machine(spec, backend)
    steps = spec.spec.stateful.steps  # type: ignore[union-attr]
    run_state_machine_as_test(machine, settings=hypothesis_settings(example_count(spec), stateful_step_count=steps))
