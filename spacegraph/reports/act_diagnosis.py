"""Where the framework's PyTorch act time goes: `Conv2D`'s layout written by hand, and ops counted per call.

`diagnose_torch_layout` times the PyTorch framework actor beside hand-written actors in the
layout the framework's `Conv2D` uses (a permute NHWC -> NCHW and back around every
convolution, the kernel passed as a permuted, non-contiguous view, the bias added after the
convolution) and in that layout with each of the two changes that remove the difference.
`op_counts` counts the ops one call runs, framework and hand-written, on either backend.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

import numpy as np

from harness.measure.timing import interleaved_rates
from spacegraph.reports.act_throughput import (BACKENDS, BATCH_SIZES, NATURE_CONVS, build, hand_written, setup_pair,
                                               weight_ending)

#: The PyTorch actors of the diagnosis, in table order: (name, description).
DIAGNOSIS_VARIANTS = (
    ("hand-written", "the hand-written actor: one permute to NCHW per call, OIHW kernels, bias inside conv2d"),
    ("conv2d-layout", "Conv2D's layout by hand: permute NHWC->NCHW and back around every convolution, "
                      "kernel.permute(3, 2, 0, 1) view, bias added after"),
    ("+fused-bias", "Conv2D's layout with the bias passed to conv2d"),
    ("+contiguous-kernel", "Conv2D's layout with kernel.permute(3, 2, 0, 1).contiguous() (a copy per call)"),
    ("+both", "Conv2D's layout with both changes"),
)


def conv_layout_actor(weights: dict[str, np.ndarray], fuse_bias: bool, contiguous_kernel: bool) -> Callable:
    """A hand-written PyTorch actor in `Conv2D`'s layout, optionally with one or both proposed changes.

    Every convolution gets its input permuted NHWC -> NCHW and its output permuted back,
    as `Conv2D`'s PyTorch body does; the kernel is stored ``(h, w, in, out)`` and
    permuted at every call. The dense head is the hand-written actor's.

    Args:
        weights: the framework's weights (``executor.get_weights()``).
        fuse_bias: pass the bias to ``conv2d`` instead of adding it to the permuted output.
        contiguous_kernel: make the permuted kernel contiguous (a copy) before ``conv2d``.

    Returns:
        ``act(states torch.float32[B,84,84,4]) -> torch.float32[B,6]``.
    """
    import torch
    import torch.nn.functional as fn

    t = torch.from_numpy
    convs = [(t(weight_ending(weights, f"{s}/kernel")), t(weight_ending(weights, f"{s}/bias")), stride) for s, stride in NATURE_CONVS]
    (dk, db), (vk, vb), (ak, ab) = [(t(weight_ending(weights, f"{s}/kernel")), t(weight_ending(weights, f"{s}/bias")))
                                    for s in ("dense_4", "value", "advantage")]

    @torch.no_grad()
    def act(states: Any) -> Any:
        x = states
        for kernel, bias, stride in convs:
            k = kernel.permute(3, 2, 0, 1)
            if contiguous_kernel:
                k = k.contiguous()
            if fuse_bias:
                x = torch.relu(fn.conv2d(x.permute(0, 3, 1, 2), k, bias, stride=stride).permute(0, 2, 3, 1))
            else:
                x = torch.relu(fn.conv2d(x.permute(0, 3, 1, 2), k, stride=stride).permute(0, 2, 3, 1) + bias)
        h = torch.relu(x.reshape(x.shape[0], -1) @ dk + db)
        v = h @ vk + vb
        a = h @ ak + ab
        return v + a - a.mean(dim=-1, keepdim=True)
    return act


def diagnose_torch_layout(batch_sizes: tuple[int, ...] = BATCH_SIZES, seconds: float = 3.0,
                          rounds: int = 10) -> dict[str, Any]:
    """Calls/s of the PyTorch framework actor and of the `DIAGNOSIS_VARIANTS`, interleaved per batch size.

    Every variant is checked against the framework's Q-values before timing.

    Returns:
        ``{"variants": {name: description}, "rows": [{"batch", "framework", <variant>: calls/s, ...,
        "ratios": {name: ratio}}]}``: best round's calls per CPU-second, and per contender the median
        over rounds of its rate over the hand-written actor's in the same round.

    Raises:
        AssertionError: when a variant's Q-values differ from the framework's.
    """
    executor = build("torch")
    weights = executor.get_weights()
    actors = {"hand-written": hand_written("torch", weights),
              "conv2d-layout": conv_layout_actor(weights, fuse_bias=False, contiguous_kernel=False),
              "+fused-bias": conv_layout_actor(weights, fuse_bias=True, contiguous_kernel=False),
              "+contiguous-kernel": conv_layout_actor(weights, fuse_bias=False, contiguous_kernel=True),
              "+both": conv_layout_actor(weights, fuse_bias=True, contiguous_kernel=True)}
    rows = []
    for batch in batch_sizes:
        framework, _, states = setup_pair("torch", batch, executor)
        expected = executor.backend.to_numpy(framework(states))
        for name, actor in actors.items():
            np.testing.assert_allclose(actor(states).numpy(), expected, rtol=1e-4, atol=1e-5,
                                       err_msg=f"diagnosis variant {name!r} at batch {batch}")
        fns = {"framework": lambda: framework(states)}
        fns.update({name: (lambda a=actor: a(states)) for name, actor in actors.items()})
        rates = interleaved_rates(fns, seconds, rounds)
        hand_rounds = rates["hand-written"]["cpu"]
        rows.append({"batch": batch, **{name: max(r["cpu"]) for name, r in rates.items()},
                     "ratios": {name: statistics.median(x / h for x, h in zip(r["cpu"], hand_rounds))
                                for name, r in rates.items()}})
    return {"variants": dict(DIAGNOSIS_VARIANTS), "rows": rows}


#: TensorFlow graph nodes that are not ops run per call in any meaningful sense.
_TF_IGNORED_NODES = ("Const", "Placeholder", "NoOp", "Identity")


def op_counts(backend: str, batch: int = 1) -> dict[str, dict[str, Any]]:
    """The ops one call runs, framework and hand-written: a count that machine load cannot blur.

    PyTorch: the top-level ATen ops one call dispatches (``torch.profiler``: ops called from
    Python, not the ones they call in turn). TensorFlow: the nodes of the traced function's
    graph, without ``Const``, ``Placeholder``, ``NoOp`` and ``Identity``.

    Returns:
        ``{"framework": {"total": n, "by_op": {op: n}}, "hand": {...}}``.

    Raises:
        ValueError: for an unknown backend.
    """
    if backend not in BACKENDS:
        raise ValueError(f"act_diagnosis.op_counts: backend must be one of {BACKENDS}; got {backend!r}")
    framework, hand, states = setup_pair(backend, batch)
    out: dict[str, dict[str, Any]] = {}
    for name, fn in (("framework", framework), ("hand", hand)):
        if backend == "torch":
            import torch

            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                fn(states)
            ops = [e.name for e in prof.events() if e.cpu_parent is None]
        else:
            graph = fn.get_concrete_function().graph.as_graph_def()
            ops = [node.op for node in graph.node if node.op not in _TF_IGNORED_NODES]
        by_op: dict[str, int] = {}
        for op in ops:
            by_op[op] = by_op.get(op, 0) + 1
        out[name] = {"total": len(ops), "by_op": dict(sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0])))}
    return out
