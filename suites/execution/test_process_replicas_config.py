"""Processes mode chosen from an agent config: DQNAgent and IMPALAAgent with ``execution.strategy: {type:
sync-replicas, replicas: 2, mode: processes}`` learn exactly as local ones; the mapping form's errors name the key
path, what was expected and what came (issue 43)."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest
import yaml

from harness.execution.strategies import DeviceStrategy, ProcessReplicas, SyncReplicas, make_strategy
from reference_agents.agents.config import ConfigError

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs")
PROCESSES = {"strategy": {"type": "sync-replicas", "replicas": 2, "mode": "processes"}}


def config(name: str, **changes) -> dict:
    with open(os.path.join(CONFIGS, name)) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update(changes)
    return cfg


def dqn_config(**changes) -> dict:
    return config("dqn_cartpole.yaml", memory={"type": "replay", "capacity": 200},
                  network={"layers": [{"type": "dense", "units": 16, "activation": "relu"}], "dueling": True},
                  **changes)


def impala_config(**changes) -> dict:
    return config("impala_cartpole.yaml", env={"id": "CartPole-v1", "num_envs": 5},
                  network={"layers": [{"type": "dense", "units": 16, "activation": "tanh"}]},
                  rollout={"length": 6, "batch_size": 1}, **changes)


def dqn_batch(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"states": rng.uniform(-0.2, 0.2, (n, 4)).astype(np.float32), "actions": rng.integers(0, 2, n),
            "rewards": rng.normal(size=n).astype(np.float32), "terminals": rng.random(n) < 0.2,
            "next_states": rng.uniform(-0.2, 0.2, (n, 4)).astype(np.float32),
            "importance_weights": rng.uniform(0.3, 1.0, n).astype(np.float32)}


def impala_rollout(columns: int, length: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"rollout_states": rng.uniform(-0.2, 0.2, (length + 1, columns, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, (length, columns)), "rewards": rng.normal(size=(length, columns)).astype(
                np.float32), "discounts": np.full((length, columns), 0.99, np.float32),
            "behaviour_logits": rng.normal(size=(length, columns, 2)).astype(np.float32)}


def assert_same_weights(want: dict, got: dict) -> None:
    """Float variables (weights, target network, optimizer slots) equal to 1e-5, the others exactly."""
    assert sorted(want) == sorted(got)
    for k in want:
        if np.asarray(want[k]).dtype.kind == "f":
            np.testing.assert_allclose(want[k], got[k], rtol=1e-5, atol=1e-5, err_msg=k)
        else:
            np.testing.assert_array_equal(want[k], got[k], err_msg=k)


@pytest.mark.distributed
@pytest.mark.parametrize("backend", ["torch", "tf"])
def test_dqn_agent_with_two_processes_learns_as_the_local_one(backend):
    from reference_agents.agents.dqn.agent import DQNAgent

    local = DQNAgent(dqn_config(), backend=backend, seed=3)
    multi = DQNAgent(dqn_config(execution=PROCESSES), backend=backend, seed=3)
    try:
        assert isinstance(multi.executor.strategy, ProcessReplicas)
        assert multi.executor.strategy.describe()["replicas"] == 2
        for step in range(3):
            batch = dqn_batch(7, step)  # 4 + 3 rows, importance weights
            a, b = local.update(batch), multi.update(batch)
            np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(a["grad_norm"], b["grad_norm"], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(a["td_errors"], b["td_errors"], rtol=1e-5, atol=1e-5)
            local.sync_target()
            multi.sync_target()
        assert_same_weights(local.get_weights(everything=True), multi.get_weights(everything=True))
    finally:
        multi.executor.close()
    assert multiprocessing.active_children() == []


@pytest.mark.distributed
def test_impala_agent_with_two_processes_learns_as_the_local_one():
    from reference_agents.agents.impala.agent import IMPALAAgent

    local = IMPALAAgent(impala_config(), backend="torch", seed=5)
    multi = IMPALAAgent(impala_config(execution=PROCESSES), backend="torch", seed=5)
    try:
        assert isinstance(multi.executor.strategy, ProcessReplicas)
        for step in range(3):
            rollout = impala_rollout(5, 6, step)  # 5 columns: 3 + 2
            a, b = local.update(rollout), multi.update(rollout)
            for key in ("loss", "pg", "baseline", "entropy", "grad_norm"):
                np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-5, err_msg=key)
        assert_same_weights(local.get_weights(everything=True), multi.get_weights(everything=True))
    finally:
        multi.executor.close()
    assert multiprocessing.active_children() == []


def test_make_strategy_takes_both_forms():
    pytest.importorskip("torch", reason="processes mode all-reduces through torch.distributed")
    assert isinstance(make_strategy({"strategy": {"type": "sync-replicas", "replicas": 1}}, ["u"]), DeviceStrategy)
    towers = make_strategy({"strategy": {"replicas": 3, "mode": "towers"}}, ["u"])
    assert isinstance(towers, SyncReplicas) and towers.devices == ["cpu"] * 3
    procs = make_strategy({"strategy": {"replicas": 2, "backend": "gloo", "devices": ["cpu", "cpu"]}}, ["u"],
                          reduction="sum")
    assert isinstance(procs, ProcessReplicas) and procs.reduction == "sum"
    assert procs.describe() == {"type": "sync-replicas", "mode": "processes", "replicas": 2, "backend": "gloo",
                                "devices": ["cpu", "cpu"]}
    assert make_strategy({"strategy": {"replicas": 2, "devices": ["cuda:0", "cuda:1"]}}, ["u"]).backend == "nccl"
    assert make_strategy({"strategy": "sync-replicas", "devices": ["cpu"]}, ["u"]).devices == ["cpu"]


@pytest.mark.parametrize("strategy,message", [
    ({"replicas": 0}, r"execution\.strategy\.replicas: expected an int >= 1; got 0"),
    ({"replicas": "2"}, r"execution\.strategy\.replicas: expected an int >= 1; got '2'"),
    ({"replicas": 2, "mode": "ring"}, r"execution\.strategy\.mode: expected one of \('processes', 'towers'\); got 'ring'"),
    ({"replicas": 2, "backend": "mpi"}, r"execution\.strategy\.backend: expected one of .*; got 'mpi'"),
    ({"replicas": 2, "mode": "towers", "backend": "nccl"}, r"execution\.strategy\.backend: only processes mode"),
    ({"replicas": 2, "devices": ["cpu"]}, r"execution\.strategy\.devices: expected a list of 2 device"),
    ({"replicas": 2, "type": "mirrored"}, r"execution\.strategy\.type: expected one of"),
    ({"replicas": 2, "type": "local"}, r"execution\.strategy\.replicas: type local runs one replica; got 2"),
    ({"replicas": 2, "gpus": 2}, r"execution\.strategy: unknown key\(s\) \['gpus'\]"),
])
def test_make_strategy_errors_name_the_key(strategy, message):
    pytest.importorskip("torch", reason="processes mode all-reduces through torch.distributed")
    with pytest.raises(ValueError, match=message):
        make_strategy({"strategy": strategy}, ["u"])


def test_make_strategy_refuses_devices_beside_the_mapping():
    with pytest.raises(ValueError, match=r"execution\.devices: with the mapping form .* execution\.strategy\.devices"):
        make_strategy({"strategy": {"replicas": 2}, "devices": ["cpu", "cpu"]}, ["u"])


@pytest.mark.parametrize("strategy,problem", [
    ({"replicas": 0}, "execution.strategy.replicas: Input should be greater than or equal to 1 (got 0)"),
    ({"replicas": 2, "mode": "ring"}, "execution.strategy.mode: Input should be 'processes' or 'towers' (got 'ring')"),
    ({"replicas": 2, "backend": "mpi"}, "execution.strategy.backend: Input should be 'auto', 'gloo' or 'nccl'"),
    ({"replicas": 2, "devices": ["cpu"]}, "execution.strategy: devices lists 1 device(s) for 2 replica(s)"),
    ({"replicas": 2, "mode": "towers", "backend": "gloo"}, "execution.strategy: backend 'gloo' is for mode processes"),
    ({"replicas": 2, "gpus": 2}, "execution.strategy.gpus: Extra inputs are not permitted"),
    ("mirrored", "execution.strategy: Input should be 'local' or 'sync-replicas' (got 'mirrored')"),
])
def test_agent_config_errors_name_the_file_and_key(tmp_path, strategy, problem):
    from reference_agents.agents.dqn.agent import DQNAgent

    path = tmp_path / "dqn.yaml"
    path.write_text(yaml.safe_dump(dqn_config(execution={"strategy": strategy})))
    with pytest.raises(ConfigError) as err:
        DQNAgent(str(path), backend="torch")
    text = str(err.value)
    assert str(path) in text and problem in text, text
    assert "<strategy" not in text  # pydantic's union tags stay out of the key paths


def test_every_strategy_describes_itself_with_the_same_keys():
    pytest.importorskip("torch", reason="processes mode all-reduces through torch.distributed")
    keys = {"type", "mode", "replicas", "backend", "devices"}
    local = make_strategy(None, ["u"]).describe()
    towers = make_strategy({"strategy": {"replicas": 2, "mode": "towers"}}, ["u"]).describe()
    procs = make_strategy({"strategy": {"replicas": 2}}, ["u"]).describe()
    assert keys <= set(local) and keys <= set(towers) and keys <= set(procs)
    assert (local["replicas"], towers["replicas"], procs["replicas"]) == (1, 2, 2)
    assert (towers["mode"], procs["mode"]) == ("towers", "processes")


def test_processes_mode_without_pytorch_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(ValueError, match=r"execution\.strategy: ProcessReplicas: processes mode all-reduces through "
                                         r"torch\.distributed on both backends, and PyTorch is not installed "
                                         r"\(pip install 'spacegraph\[torch\]'\)"):
        make_strategy({"strategy": {"replicas": 2}}, ["u"])
    assert isinstance(make_strategy({"strategy": {"replicas": 2, "mode": "towers"}}, ["u"]), SyncReplicas)
