"""Traced API methods on PyTorch: one TorchScript graph per input shapes instead of eager, step-by-step dispatch.

An API method's flat call chain (`harness.graph.chain`) runs its graph functions eagerly: every op is a
Python call into the dispatcher, and every step a Python call of its own. For a small network acting on a
few observations that is most of the time (a CartPole act: 12 ops in 7 steps, about 56 us eager against
36 us traced on this host). `TracedApi` records the chain once per input shapes with `torch.jit.trace` and
then runs the recorded graph, whose ops execute in TorchScript's interpreter.

What a trace keeps and what it freezes:

- Variables are read live: the graph holds the variable tensors themselves, so in-place changes made
  elsewhere (optimizer steps, `set_weights`) are seen by the next call.
- Random draws use the executor's generator (`TorchOps._gen`) as they do eagerly: a traced method draws
  exactly what the eager one draws from the same seed.
- Python values computed while tracing are frozen into the graph: sizes (so one trace is kept per input
  shapes), the component's config constants, and any value a graph function reads out of a tensor
  (``.item()``, ``int(t)``, a branch on a tensor). The last would make the trace wrong for other inputs.
- Writes are not kept: TorchScript drops an in-place change of a tensor the graph holds as a constant
  (a variable) when no output depends on it, so a method that assigns variables would silently stop
  assigning them.

`check_traceable` refuses the last two at build (the executor calls it while the build's sample runs are
still to be undone): it traces the method on two values drawn from its argument spaces; the graphs must be
the same, and the recording runs must change no variable or argument in place (their version counters
must not move). Every later trace (`trace_chain`) checks the version counters again.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import torch

from harness.backends.base import TraceError
from harness.spaces import Space

#: Distinct input shapes traced per method; calls with further shapes run the eager chain (the same results,
#: at eager speed; a RuntimeWarning says so once per method).
MAX_TRACES = 16

_JIT_DIR = os.path.dirname(torch.jit.__file__)


class TracedApi:
    """Runs an API method's call chain as a traced TorchScript graph, one per input shapes.

    Args:
        name: the API method's name (for errors).
        chain: the flat call chain, positional tensor arguments.
        variables: every variable of the graph (their requires_grad is switched off while tracing: a trace
            holds only tensors without it as constants; none may change while tracing).
        where: names the root component, for errors.
        recording: a lock held while a trace is recorded; the executor's gradient-recording methods hold it
            too (`TorchBackend.compile_api`), so none of them runs while the variables' requires_grad is off
            (its gradients would silently be zeros). None: a lock of this method's own.
    """

    def __init__(self, name: str, chain: Callable, variables: Sequence[torch.Tensor], where: str = "",
                 recording: Any = None) -> None:
        self.name, self.chain, self.where = name, chain, where
        self.variables = list(variables)
        self.graphs: dict[tuple, Any] = {}
        self._lock = recording if recording is not None else threading.Lock()
        self._warned = False

    def __call__(self, *args: torch.Tensor) -> Any:
        key = tuple((a.shape, a.dtype) for a in args)
        graph = self.graphs.get(key)
        if graph is not None:
            return graph(*args)
        if len(self.graphs) >= MAX_TRACES:
            if not self._warned:
                self._warned = True
                shapes = ", ".join(str(list(a.shape)) for a in args)
                warnings.warn(f"{self.where}: API method {self.name!r}: {MAX_TRACES} input shapes traced already; "
                              f"calls with further shapes (now {shapes}) run the eager chain: the same results "
                              f"at eager speed (fix the batch size to keep them traced)", RuntimeWarning,
                              stacklevel=2)
            return self.chain(*args)
        with self._lock:
            graph = self.graphs.get(key)
            if graph is not None:  # another thread traced it while this one waited
                return graph(*args)
            # the trace is the call itself: its outputs are the call's (the chain ran once, eagerly, recording)
            graph, outputs = trace_chain(self.name, self.chain, args, self.variables, self.where)
            self.graphs[key] = graph
            return outputs


def trace_chain(name: str, chain: Callable, args: tuple, variables: Sequence[torch.Tensor], where: str
                ) -> tuple[Any, Any]:
    """The traced graph of ``chain`` on ``args`` and the outputs of the run that recorded it.

    Raises:
        TraceError: when a graph function branches on a tensor's value, or the run changes a variable or
            an argument in place (the call's effects then stand: it ran once, eagerly).
    """
    captured: list[Any] = []

    def run(*inputs: Any) -> Any:
        out = chain(*inputs)
        captured.append(out)
        return out
    run.__module__, run.__name__ = __name__, name  # torch.jit.trace names the graph by them
    # inference tensors have no version counter (the check's own samples are made in inference mode)
    held_vars = [v for v in variables if not v.is_inference()]
    held = held_vars + [a for a in args if isinstance(a, torch.Tensor) and not a.is_inference()]
    versions = [t._version for t in held]  # an in-place change of a tensor (or a view of it) bumps its version
    grads = [v for v in variables if v.requires_grad]
    try:
        for v in grads:
            v.requires_grad_(False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph = torch.jit.trace(run, args, check_trace=False, strict=False)
    finally:
        for v in grads:
            v.requires_grad_(True)
    # The recording caught every warning (the process's, while it ran): those that are not the tracer's own
    # (its TracerWarnings, and torch.jit's own notice that tracing is deprecated, said in docs/architecture.md)
    # go on as if nothing had caught them, under the filters in force.
    for w in caught:
        if not issubclass(w.category, torch.jit.TracerWarning) and not w.filename.startswith(_JIT_DIR):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    # Sizes turned into ints warn too, and are expected (one trace per input shapes); a truth value is not.
    branch = next((w for w in caught if issubclass(w.category, torch.jit.TracerWarning)
                   and "Python boolean" in str(w.message)), None)
    if branch is not None:
        raise TraceError(f"{where}: API method {name!r} cannot be traced: a graph function branches on a tensor's "
                         f"value ({branch.filename}:{branch.lineno}); leave it out of the executor's trace list")
    written = [i for i, (t, v) in enumerate(zip(held, versions)) if t._version != v]
    if written:
        what = "a variable" if written[0] < len(held_vars) else "an argument"
        raise TraceError(f"{where}: API method {name!r} cannot be traced: it changes a tensor in place ({what}), "
                         f"and a traced graph drops writes no output depends on; leave it out of the executor's "
                         f"trace list")
    return graph, captured[0]


def check_traceable(name: str, chain: Callable, arg_spaces: dict[str, Space], variables: Sequence[torch.Tensor],
                    where: str, seed: int = 0) -> None:
    """Traces ``chain`` on two values drawn from ``arg_spaces`` (two rows per extra rank) and compares.

    Runs the chain twice: call it where its effects are undone after (the build's sample runs).

    Raises:
        TraceError: when the two graphs differ (a value read out of a tensor, or state a step keeps between
            calls, went into the trace), a graph function branches on a tensor's value, or the runs change a
            variable or an argument in place.
    """
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(2):
        args = tuple(_sample(space, rng) for space in arg_spaces.values())
        graphs.append(trace_chain(name, chain, args, variables, where)[0])
    if str(graphs[0].graph) != str(graphs[1].graph):
        raise TraceError(f"{where}: API method {name!r} cannot be traced: its recorded graph differs between two "
                         f"inputs of the same shapes: a value read out of a tensor (.item(), int(), a size read from "
                         f"data) or state a step keeps between calls went into the trace, which would freeze it; "
                         f"leave it out of the executor's trace list")


def _sample(space: Space, rng: np.random.Generator) -> torch.Tensor:
    size = tuple(2 for _ in space.extra_ranks) or None
    return torch.from_numpy(np.array(space.sample(size=size, rng=rng), dtype=space.dtype))  # 0-d stays 0-d
