"""Turns one recorded graph-function call into a backend callable (split/flatten adapters)."""

from __future__ import annotations

import functools
from typing import Any, Callable

import optree

from harness.graph.errors import BuildError
from harness.graph.records import GraphFnCall
from harness.spaces import ContainerSpace, Space


def _structure(space: ContainerSpace) -> tuple[list[str], Any]:
    paths = [k for k, _ in space.leaves()]
    template = space.unflatten({k: 0 for k in paths})
    return paths, optree.tree_structure(template)


def make_step(step: GraphFnCall, backend: Any, arg_spaces: list[Space | None]) -> Callable:
    """The callable that runs ``step``'s graph function on ``backend``.

    Args:
        step: the recorded call.
        backend: the `Backend` whose op namespace the function receives.
        arg_spaces: the space of each argument (None for constants).
    """
    spec, comp = step.spec, step.component
    body = functools.partial(spec.body(backend.name), comp, backend.ops)
    containers = [i for i, s in enumerate(arg_spaces) if isinstance(s, ContainerSpace)]
    if spec.split and containers:
        fn = _split_step(step, body, arg_spaces, containers)
    elif spec.flatten and containers:
        fn = _flatten_step(body, arg_spaces, containers)
    else:
        fn = body
    device = comp.effective_device()
    return backend.place(fn, device) if device else fn


def _split_step(step: GraphFnCall, body: Callable, arg_spaces: list[Space | None], containers: list[int]) -> Callable:
    spec = step.spec
    structures = {i: _structure(arg_spaces[i]) for i in containers}  # type: ignore[arg-type]
    paths, treespec = structures[containers[0]]
    for i in containers[1:]:
        if structures[i][0] != paths:
            raise BuildError(
                f"graph function {step.where} (split=True): container inputs "
                f"'{spec.arg_names[containers[0]]}' and '{spec.arg_names[i]}' have different key paths "
                f"{paths} vs {structures[i][0]}"
            )
    is_container = [i in structures for i in range(len(arg_spaces))]
    returns = len(step.outputs)

    def split_call(*args: Any) -> Any:
        flat = [optree.tree_leaves(a) if c else None for a, c in zip(args, is_container)]
        outs = []
        for j in range(len(paths)):
            outs.append(body(*[f[j] if c else a for a, f, c in zip(args, flat, is_container)]))
        if returns == 0:
            return None
        if returns == 1:
            return treespec.unflatten(outs)
        return tuple(treespec.unflatten([o[r] for o in outs]) for r in range(returns))

    return split_call


def _flatten_step(body: Callable, arg_spaces: list[Space | None], containers: list[int]) -> Callable:
    structures = {i: _structure(arg_spaces[i]) for i in containers}  # type: ignore[arg-type]
    by_keys = {tuple(sorted(p)): (p, t) for p, t in structures.values()}

    def renest(value: Any) -> Any:
        if isinstance(value, dict):
            found = by_keys.get(tuple(sorted(value)))
            if found is not None:
                return found[1].unflatten([value[p] for p in found[0]])
        return value

    def flatten_call(*args: Any) -> Any:
        flat_args = [dict(zip(structures[i][0], optree.tree_leaves(a))) if i in structures else a
                     for i, a in enumerate(args)]
        out = body(*flat_args)
        if isinstance(out, tuple):
            return tuple(renest(o) for o in out)
        return renest(out)

    return flatten_call
