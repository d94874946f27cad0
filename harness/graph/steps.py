"""Turns one recorded graph-function call into a backend callable (split/flatten adapters)."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import numpy as np
import optree

from harness.graph.errors import BuildError
from harness.graph.records import GraphFnCall
from harness.spaces import BoxSpace, ContainerSpace, Space


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


#: How many values drawn from a step's input spaces `host_step` compares the host and backend results on.
HOST_PROBES = 4


def is_scalar_space(space: Any) -> bool:
    """Whether ``space`` holds one scalar: a box of shape () without batch or time rank."""
    return isinstance(space, BoxSpace) and space.shape == () and not space.extra_ranks


def host_step(step: GraphFnCall, backend: Any, arg_spaces: list[Space | None], out_spaces: list[Space],
              backend_fn: Callable, rng: np.random.Generator) -> Callable | None:
    """``step`` run on the host with ``backend.host_ops`` (NumPy), or None where it must stay on the backend.

    A step qualifies when its backend has host ops, it takes at least one input, every input and output
    is a scalar (`is_scalar_space`), its component has no device, its graph function has no body of its
    own for this backend and does not record gradients. It then runs on the host only if, on
    `HOST_PROBES` inputs drawn from its input spaces, the host run succeeds and returns NumPy scalars equal
    to ``backend_fn``'s results (integers and booleans exactly, floats within 1e-6 relative): a function
    calling an op the host lacks (random draws, variables, shapes) or one whose host result differs keeps
    running on the backend.

    The callable takes what ``backend_fn`` takes (backend tensors, constants as they are) and returns
    backend tensors of the output spaces' dtypes (`Backend.from_host`), so the steps around it see no
    difference, except that its outputs carry no autograd history: only the chains of API methods that
    record no gradients use it (`harness.graph.chain.build_chain`).
    """
    host = getattr(backend, "host_ops", None)
    spec, comp = step.spec, step.component
    if host is None or spec.records or backend.name in spec.bodies or comp.effective_device() is not None:
        return None
    if not out_spaces or not any(s is not None for s in arg_spaces):
        return None
    if not all(s is None or is_scalar_space(s) for s in arg_spaces) or not all(map(is_scalar_space, out_spaces)):
        return None
    body = functools.partial(spec.body(backend.name), comp, host)
    in_types = [None if s is None else np.dtype(s.dtype).type for s in arg_spaces]
    out_dtypes = [np.dtype(s.dtype) for s in out_spaces]
    host_value, from_host = backend.host_value, backend.from_host
    single = len(step.outputs) == 1

    def run_body(args: Any) -> Any:
        return body(*[a if t is None else t(host_value(a)) for a, t in zip(args, in_types)])

    def on_host(*args: Any) -> Any:
        out = run_body(args)
        if single:
            return from_host(out, out_dtypes[0])
        return tuple(from_host(o, d) for o, d in zip(out, out_dtypes))

    def host_results(args: list[Any]) -> list[Any]:
        out = run_body(args)
        outs = [out] if single else list(out)
        if len(outs) != len(out_dtypes) or not all(isinstance(o, (np.generic, int, float, bool)) for o in outs):
            raise TypeError("not NumPy scalars")
        return [np.asarray(o, d) for o, d in zip(outs, out_dtypes)]

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for _ in range(HOST_PROBES):
            probe = [a if s is None else backend.to_tensor(np.asarray(s.sample(None, rng), s.dtype))
                     for a, s in zip(step.args, arg_spaces)]
            try:
                on_host_values = host_results(probe)
                on_backend = backend_fn(*probe)
            except Exception:  # an op the host lacks, a value it cannot take: the step stays on the backend
                return None
            backend_values = [on_backend] if single else list(on_backend)
            for h, b, d in zip(on_host_values, backend_values, out_dtypes):
                if not backend.is_tensor(b):
                    return None
                shape, dtype = backend.tensor_shape_dtype(b)
                b = backend.to_numpy(b)
                if shape != () or dtype != d or not _same_value(h, b):
                    return None
    return on_host


def _same_value(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind == "f":
        return bool(np.allclose(a, b, rtol=1e-6, atol=0.0, equal_nan=True))
    return bool(a == b)
