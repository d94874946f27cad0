"""The graphs and batches the multi-device tests, benchmark and report share: a DQN and an IMPALA learner.

Nothing here imports a framework: the executor imports the backend asked for (``torch`` never pulls in
TensorFlow).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from harness.execution.executor import GraphExecutor
from harness.execution.strategies import DeviceStrategy, SyncReplicas

#: The update method each loss's graph replicates, and how its loss reduces the batch.
UPDATES = {"dqn": ("update_from_batch", "mean"), "impala": ("update", "sum")}
LOSSES = tuple(UPDATES)
#: The networks `build` and `batch` take: ``mlp`` (dense layers of ``hidden`` on 4 floats) or ``nature`` (the Nature
#: DQN CNN, `nature_dqn_layers`, on ``uint8[84,84,4]`` Atari frames that the graph divides by 255, as dqn_pong's).
NETWORKS = ("mlp", "nature")
NATURE_OBS = (84, 84, 4)
NATURE_PREPROCESSING = [{"type": "divide", "divisor": 255}]


def _layers(hidden: Sequence[int], network: str) -> list[dict[str, Any]]:
    if network == "nature":
        from reference_agents.components.nn import nature_dqn_layers

        return nature_dqn_layers()
    if network != "mlp":
        raise ValueError(f"multi_device_graphs: network must be one of {NETWORKS}; got {network!r}")
    return [{"type": "dense", "units": int(u), "activation": "relu"} for u in hidden]


def _state_space(obs: int, network: str) -> Any:
    from harness.spaces import FloatBox, IntBox

    return IntBox(low=0, high=255, shape=NATURE_OBS, dtype="uint8") if network == "nature" else FloatBox((obs,))


def _states(rng: np.random.Generator, lead: tuple[int, ...], obs: int, network: str) -> np.ndarray:
    if network == "nature":
        return rng.integers(0, 256, (*lead, *NATURE_OBS), dtype=np.uint8)
    return rng.normal(size=(*lead, obs)).astype(np.float32)


def _preprocessing(network: str) -> list[dict[str, Any]] | None:
    return [dict(p) for p in NATURE_PREPROCESSING] if network == "nature" else None


def dqn_graph(obs: int = 4, actions: int = 2, hidden: Sequence[int] = (16,), memory: bool = False,
              network: str = "mlp") -> tuple[Any, dict]:
    """A `DQNGraph` (double Q, Adam with clipping) and its input spaces (``memory`` adds an in-graph replay;
    ``network``: one of `NETWORKS`)."""
    from harness.spaces import BoolBox, Dict, FloatBox, IntBox
    from reference_agents.agents.dqn.graph import DQNGraph

    state = _state_space(obs, network)
    records = Dict(states=state, actions=IntBox(actions), rewards=FloatBox(()), terminals=BoolBox(),
                   next_states=state, discounts=FloatBox((), 0.0, 1.0)).with_batch_rank()
    layers = _layers(hidden, network)
    graph = DQNGraph(actions, layers, False, {"type": "replay", "capacity": 64} if memory else None,
                     {"gamma": 0.9, "double_q": True}, {"type": "adam", "learning_rate": 0.01, "clip_grad_norm": 5.0},
                     {"type": "constant", "value": 0.1}, record_space=records, preprocessing=_preprocessing(network))
    spaces = {"states": state.with_batch_rank(), "time_step": "int64[]", "records": records,
              "importance_weights": "float32[B]"}
    if memory:
        spaces["batch_size"] = "int64[]"
    return graph, spaces


def dqn_methods(memory: bool = False) -> list[str]:
    """The root API methods the DQN tests build."""
    return ["act", "update_from_batch", "sync_target"] + (["insert_records", "update_from_memory"] if memory else [])


def dqn_batch(size: int, obs: int = 4, actions: int = 2, seed: int = 0, network: str = "mlp") -> tuple:
    """``(records, importance_weights)`` for `dqn_graph`'s ``update_from_batch``."""
    rng = np.random.default_rng(seed)
    records = dict(states=_states(rng, (size,), obs, network), actions=rng.integers(0, actions, size),
                   rewards=rng.normal(size=size).astype(np.float32), terminals=rng.random(size) < 0.2,
                   next_states=_states(rng, (size,), obs, network),
                   discounts=np.full(size, 0.9, np.float32))
    return records, rng.uniform(0.5, 1.0, size).astype(np.float32)


def impala_graph(obs: int = 4, actions: int = 3, hidden: Sequence[int] = (16,), reduction: str = "sum",
                 network: str = "mlp") -> tuple[Any, dict]:
    """An `IMPALAGraph` (feed-forward, RMSProp with clipping) and its input spaces (time-major rollouts)."""
    from reference_agents.agents.impala.graph import IMPALAGraph

    layers = _layers(hidden, network)
    graph = IMPALAGraph(actions, layers, None, {"gamma": 0.99, "baseline_cost": 0.5, "entropy_cost": 0.01,
                                                "reduction": reduction},
                        {"type": "rmsprop", "learning_rate": 0.01, "clip_grad_norm": 40.0},
                        preprocessing=_preprocessing(network))
    state = _state_space(obs, network)
    spaces = {"states": state.with_batch_rank(), "rollout_states": state.with_ranks(True, True, time_major=True),
              "actions": f"int64[T,B](0,{actions - 1})", "rewards": "float32[T,B]",
              "discounts": "float32[T,B](0,1)", "behaviour_logits": f"float32[T,B,{actions}]"}
    return graph, spaces


def impala_batch(size: int, length: int = 5, obs: int = 4, actions: int = 3, seed: int = 0,
                 network: str = "mlp") -> tuple:
    """``(rollout_states [T+1,B], actions, rewards, discounts, behaviour_logits [T,B])`` for ``update``."""
    rng = np.random.default_rng(seed)
    return (_states(rng, (length + 1, size), obs, network),
            rng.integers(0, actions, (length, size)), rng.normal(size=(length, size)).astype(np.float32),
            np.full((length, size), 0.99, np.float32), rng.normal(size=(length, size, actions)).astype(np.float32))


def build(loss: str, backend: str, devices: Sequence[str] | None, seed: int = 0, hidden: Sequence[int] = (16,),
          memory: bool = False, device_map: dict[str, str] | None = None,
          strategy: DeviceStrategy | None = None, network: str = "mlp") -> GraphExecutor:
    """An executor over the ``loss`` graph: single-device with ``devices`` None, else `SyncReplicas`
    (or the ``strategy`` given); ``network``: one of `NETWORKS`."""
    method, reduction = UPDATES[loss]
    if loss == "dqn":
        graph, spaces = dqn_graph(hidden=hidden, memory=memory, network=network)
        methods = dqn_methods(memory)
    else:
        graph, spaces = impala_graph(hidden=hidden, reduction=reduction, network=network)
        methods = ["act", "update"]
    if strategy is None:
        strategy = DeviceStrategy() if devices is None else SyncReplicas(list(devices), [method], reduction=reduction)
    return GraphExecutor(graph, spaces, backend=backend, seed=seed, api_methods=methods, strategy=strategy,
                         device_map=device_map)


def batch(loss: str, size: int, seed: int = 0, network: str = "mlp") -> tuple:
    """The inputs of the ``loss`` graph's update method for a batch of ``size`` (rollouts for IMPALA)."""
    return dqn_batch(size, seed=seed, network=network) if loss == "dqn" else impala_batch(size, seed=seed,
                                                                                          network=network)


def main_weights(executor: GraphExecutor) -> dict[str, np.ndarray]:
    """The root's own variables (no replica copies, gradient accumulators or their optimizer)."""
    return {k: v for k, v in executor.get_weights().items() if "replica_" not in k}


def replica_weights(executor: GraphExecutor, index: int) -> dict[str, np.ndarray]:
    """Replica ``index``'s (>= 1) copy of each root variable, keyed by the root's path."""
    root = executor.graph.root.global_scope
    tag = f"{root}/replica_{index}/"
    return {f"{root}/{k[len(tag):]}": v for k, v in executor.get_weights().items()
            if k.startswith(tag) and not k.endswith("/grad")}


def shard_rows(total: int, count: int, index: int) -> slice:
    """The rows of shard ``index`` of ``count`` as `BatchSharder` cuts them (the first ``total % count`` get one more)."""
    base, rem = divmod(total, count)
    start = index * base + min(index, rem)
    return slice(start, start + base + (1 if index < rem else 0))


def distributed_run(rank: int, world: int, loss: str, size: int, steps: int, device: str = "cpu") -> dict:
    """One process of a `DistributedReplicas` run (for `launch`): ``steps`` updates on this rank's shard of
    the same global batches every rank draws; returns the root's weights."""
    from harness.execution.strategies.distributed import DistributedReplicas

    method, reduction = UPDATES[loss]
    executor = build(loss, "torch", None, strategy=DistributedReplicas(device, [method], reduction=reduction))
    for step in range(steps):
        args = batch(loss, size, seed=step)
        rows = shard_rows(size, world, rank)
        if loss == "dqn":
            records, weights = args
            executor.execute(method, {k: v[rows] for k, v in records.items()}, weights[rows])
        else:
            executor.execute(method, *(a[:, rows] for a in args))
    return main_weights(executor)
