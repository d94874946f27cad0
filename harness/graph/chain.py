"""Contracts a root API trace into one flat Python function: no component on the call path."""

from __future__ import annotations

import keyword
import re
from typing import Any, Callable

from harness.graph.assembly import ApiTrace
from harness.graph.records import Record, records_in


def _ident(name: str) -> str:
    name = re.sub(r"\W", "_", name)
    return f"arg_{name}" if keyword.iskeyword(name) or not name or name[0].isdigit() else name


def build_chain(trace: ApiTrace, step_fns: dict[int, Callable], host_fns: dict[int, Callable] | None = None
                ) -> tuple[Callable, str]:
    """Generates ``def api(args): r1 = s0(...); ...; return ...`` for one root API method.

    Args:
        trace: the assembled root API method.
        step_fns: the backend callable for each step, keyed by ``id(step)``.
        host_fns: the host callable of each step that may run on the host (`harness.graph.steps.host_step`),
            keyed by ``id(step)``. A method that records gradients (``trace.records``) runs every step on the
            backend: a host step's outputs are new tensors, cut off from the autograd graph of its inputs, so a
            scalar step between a loss and the gradient step would silently zero the gradients. The others use
            the host callable, marked ``(host)`` in the source's comments (`host_steps_of`).

    Returns:
        The function (its positional arguments are the root API arguments that
        have spaces, in declaration order) and its source, for inspection.
    """
    env: dict[str, Any] = {}
    names: dict[int, str] = {}
    params = []
    for arg, rec in trace.args.items():
        names[rec.id] = _ident(arg)
        params.append(names[rec.id])

    def expr(value: Any) -> str:
        if isinstance(value, Record):
            if value.id not in names:
                raise AssertionError(f"record {value.label} used before it is produced")
            return names[value.id]
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k!r}: {expr(v)}" for k, v in value.items()) + "}"
        if isinstance(value, tuple):
            return "(" + "".join(f"{expr(v)}, " for v in value) + ")"
        if isinstance(value, list):
            return "[" + ", ".join(expr(v) for v in value) + "]"
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        const = f"_c{len(env)}"
        env[const] = value
        return const

    on_host = host_steps_of(trace, host_fns)
    lines = [f"def {_ident(trace.name)}({', '.join(params)}):"]
    for i, step in enumerate(trace.steps):
        fn_name = f"_s{i}"
        env[fn_name] = host_fns[id(step)] if id(step) in on_host else step_fns[id(step)]  # type: ignore[index]
        call = f"{fn_name}({', '.join(expr(a) for a in step.args)})"
        outs = []
        for rec in step.outputs:
            names[rec.id] = f"r{len(names)}"
            outs.append(names[rec.id])
        comment = f"  # {step.component.global_scope}.{step.spec.name}{' (host)' if id(step) in on_host else ''}"
        if not outs:
            lines.append(f"    {call}{comment}")
        elif len(outs) == 1:
            lines.append(f"    {outs[0]} = {call}{comment}")
        else:
            lines.append(f"    {', '.join(outs)} = {call}{comment}")
    lines.append(f"    return {expr(trace.outputs)}")
    source = "\n".join(lines) + "\n"
    namespace = dict(env)
    exec(compile(source, f"<spacegraph api {trace.name}>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace[_ident(trace.name)], source


def host_steps_of(trace: ApiTrace, host_fns: dict[int, Callable] | None) -> set[int]:
    """The ids of the steps of ``trace`` that its chain runs on the host: none where it records gradients."""
    if not host_fns or trace.records:
        return set()
    return {id(step) for step in trace.steps if id(step) in host_fns}


def unused_args(trace: ApiTrace) -> tuple[str, ...]:
    """The root arguments of ``trace`` that no step reads and no output is, in declaration order.

    A method can take an argument its chain never reads: ``act(states, time_step)`` of an agent whose
    exploration rate is constant reads no time step (`EpsilonGreedy.explore` takes the constant instead).
    """
    used = {rec.id for rec in records_in([[step.args for step in trace.steps], trace.outputs])}
    return tuple(arg for arg, rec in trace.args.items() if rec.id not in used)

