"""Per-call cost of the framework against the same graph functions called by hand."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from harness.execution.executor import GraphExecutor
from harness.measure.timing import calls_per_s
from harness.spaces import FloatBox
from spacegraph.reports.graphs import DenseStack


def by_hand(executor: GraphExecutor, method: str) -> Callable:
    """The method's graph functions called in order by hand: the chain's steps without the chain.

    Each graph function is bound to its component and the backend's ``F`` exactly as
    the build binds it, so only the framework's call path differs.
    """
    import functools

    api = executor.apis[method]
    steps = [functools.partial(s.spec.body(executor.backend.name), s.component, executor.backend.ops)
             for s in executor.assembly.traces[method].steps]
    if executor.backend_name == "torch":
        import torch

        @torch.no_grad()
        def hand(x: Any) -> Any:
            for step in steps:
                x = step(x)
            return x
        return hand
    import tensorflow as tf

    def hand_tf(x: Any) -> Any:
        for step in steps:
            x = step(x)
        return x
    return tf.function(hand_tf, input_signature=[executor.backend.input_spec(s) for s in api.arg_spaces.values()],
                       autograph=False)


def measure(backend: str, blocks: int = 2, batch: int = 16, seconds: float = 0.5) -> dict[str, float]:
    """Calls/s of a `DenseStack` API method through the framework and by hand, and their ratio."""
    executor = GraphExecutor(DenseStack(blocks=blocks), {"inputs": FloatBox(16, batch_rank=True)}, backend=backend)
    x = executor.backend.to_tensor(np.random.default_rng(0).standard_normal((batch, 16)).astype(np.float32))
    framework, hand = executor.api_function("apply"), by_hand(executor, "apply")
    np.testing.assert_allclose(executor.backend.to_numpy(framework(x)), executor.backend.to_numpy(hand(x)), rtol=1e-6)
    fw = calls_per_s(lambda: framework(x), seconds, warmup=20, batch=50)
    hd = calls_per_s(lambda: hand(x), seconds, warmup=20, batch=50)
    return {"framework_calls_per_s": fw, "hand_calls_per_s": hd, "ratio": fw / hd}
