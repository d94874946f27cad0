"""`SyncReplicas`: N-replica updates equal the single-device update, replicas stay identical, placement,
device errors, uneven shards, the agent config (issue 16)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.strategies import DeviceStrategy, SyncReplicas, make_strategy
from spacegraph.reports import multi_device_graphs as mdg


def tf_devices(count: int) -> list[str]:
    """``count`` TF devices: distinct logical CPUs where the runtime has them, else /cpu:0 repeated."""
    from harness.backends.tf.devices import logical_cpus

    cpus = logical_cpus(4)
    return [cpus[i % len(cpus)] for i in range(1, count + 1)] if len(cpus) > count else ["/cpu:0"] * count


def devices(backend: str, count: int) -> list[str]:
    return tf_devices(count) if backend == "tf" else ["cpu"] * count


def close(a: dict, b: dict, tol: float = 2e-5) -> float:
    assert sorted(a) == sorted(b)
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


@pytest.mark.parametrize("backend", ["torch", "tf"])
@pytest.mark.parametrize("loss,count,size", [("dqn", 3, 7), ("impala", 2, 5)])
def test_replicated_update_equals_single_device_update(backend, loss, count, size):
    single = mdg.build(loss, backend, None)
    multi = mdg.build(loss, backend, devices(backend, count))
    method = mdg.UPDATES[loss][0]
    for step in range(2):  # uneven shards (7 rows on 3 replicas: 3, 2, 2; 5 on 2: 3, 2)
        args = mdg.batch(loss, size, seed=step)
        a, b = single.execute(method, *args), multi.execute(method, *args)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-5)  # the loss over the whole batch
        if loss == "dqn":
            np.testing.assert_allclose(a[2], b[2], rtol=1e-5, atol=1e-5)  # TD errors in batch order
        norm = 1 if loss == "dqn" else 4  # the gradient norm: the synchronised step's (not a sum over towers)
        np.testing.assert_allclose(a[norm], b[norm], rtol=1e-5, atol=1e-5)
    assert close(mdg.main_weights(single), mdg.main_weights(multi)) < 2e-5


def test_planted_unweighted_average_is_caught():
    """Gradients averaged without the shard weights (a sum reduction on a mean loss) differ on uneven shards."""
    single = mdg.build("dqn", "torch", None)
    wrong = mdg.GraphExecutor(*mdg.dqn_graph(), backend="torch", api_methods=mdg.dqn_methods(),
                              strategy=SyncReplicas(["cpu"] * 3, ["update_from_batch"], reduction="sum"))
    args = mdg.batch("dqn", 7)
    single.execute("update_from_batch", *args)
    wrong.execute("update_from_batch", *args)
    assert close(mdg.main_weights(single), mdg.main_weights(wrong)) > 1e-4


@pytest.mark.parametrize("backend", ["torch", "tf"])
def test_replicas_stay_identical_over_many_steps(backend):
    single = mdg.build("dqn", backend, None)
    multi = mdg.build("dqn", backend, devices(backend, 2))
    for step in range(25):
        args = mdg.batch("dqn", 9, seed=step)
        single.execute("update_from_batch", *args)
        multi.execute("update_from_batch", *args)
        main = mdg.main_weights(multi)
        replica = mdg.replica_weights(multi, 1)  # the online and the target network's copies
        assert replica and all(np.array_equal(replica[k], main[k]) for k in replica), step
        if step % 10 == 9:  # the replicas' target networks take the new one at the next update
            single.execute("sync_target")
            multi.execute("sync_target")
    assert close(mdg.main_weights(single), mdg.main_weights(multi)) < 1e-4


def test_sharder_splits_uneven_batches_and_refuses_too_small_ones():
    multi = mdg.build("dqn", "torch", ["cpu"] * 3)
    records, weights = mdg.batch("dqn", 3)
    multi.execute("update_from_batch", records, weights)  # one row each
    with pytest.raises(Exception, match="a batch of 2 rows cannot be split across 3 replicas"):
        multi.execute("update_from_batch", {k: v[:2] for k, v in records.items()}, weights[:2])


def test_device_map_is_honoured_tf_logical_devices():
    cpus = tf_devices(2)
    if len(set(cpus)) < 2:
        pytest.skip("TensorFlow was initialized before the logical CPUs could be made (run this module alone)")
    multi = mdg.build("dqn", "tf", cpus, memory=True)
    place = multi.placement()
    assert place["dqn/memory"]["device"] is None  # the host: the backend's default device
    assert all(d.endswith("CPU:0") for d in place["dqn/memory"]["variables"])
    assert place["dqn/q_network/network/dense_0"]["device"] == cpus[0]
    assert [d.upper()[-5:] for d in place["dqn/q_network/network/dense_0"]["variables"]] == [cpus[0].upper()[-5:]]
    assert place["dqn/replica_1"]["device"] == cpus[1]
    tower = place["dqn/replica_1/q_network/network/dense_0"]["variables"]
    assert [d.upper()[-5:] for d in tower] == [cpus[1].upper()[-5:]]


def test_device_map_is_honoured_torch():
    multi = mdg.build("dqn", "torch", ["cpu", "cpu"], memory=True, device_map={"dqn/memory": "cpu"})
    place = multi.placement()
    assert place["dqn/memory"] == {"device": "cpu", "variables": ["cpu"]}
    assert place["dqn/replica_1/q_network"]["device"] == "cpu"
    assert "dqn/replica_sharder_update_from_batch" in place and "dqn/replica_0_optimizer" in place


@pytest.mark.parametrize("backend,bad,exists", [("tf", "/cpu:9", "logical devices"), ("torch", "cuda:3", "cuda devices")])
def test_bad_device_names_the_device_the_component_and_what_exists(backend, bad, exists):
    good = devices(backend, 1)[0]
    with pytest.raises(ValueError) as err:
        mdg.build("dqn", backend, [good, bad])
    text = str(err.value)
    assert bad in text and "dqn/replica_1" in text and exists in text and "sync-replicas" in text


def test_strategy_arguments_and_config_are_checked():
    with pytest.raises(ValueError, match="devices must be a non-empty list"):
        SyncReplicas([], ["update"])
    with pytest.raises(ValueError, match="reduction must be one of"):
        SyncReplicas(["cpu"], ["update"], reduction="max")
    graph, spaces = mdg.dqn_graph()
    with pytest.raises(ValueError, match=r"no API method\(s\) \['learn'\]"):
        SyncReplicas(["cpu"], ["learn"]).expand(graph)
    assert isinstance(make_strategy(None, ["update"]), DeviceStrategy)
    assert make_strategy({"strategy": "sync-replicas", "devices": ["cpu", "cpu"]}, ["u"]).devices == ["cpu", "cpu"]
    with pytest.raises(ValueError, match=r"execution\.strategy: unknown strategy 'mirrored'"):
        make_strategy({"strategy": "mirrored"}, ["u"])


def test_dqn_agent_config_selects_the_strategy():
    from reference_agents.agents.config import ConfigError
    from reference_agents.agents.dqn.agent import DQNAgent

    base = {"env": {"id": "CartPole-v1"}, "network": {"layers": [{"type": "dense", "units": 8}]},
            "backend": "torch"}
    with pytest.raises(ConfigError, match="execution"):
        DQNAgent({**base, "execution": {"strategy": "sync-replicas"}}, state_space="float32[4]",
                 action_space="int64[](0,1)")
    # replay in the graph under a replicated update: drawn by sample_from_memory, learned by update_from_batch
    agent = DQNAgent({**base, "execution": {"strategy": "sync-replicas", "devices": ["cpu", "cpu"]}},
                     state_space="float32[4]", action_space="int64[](0,1)")
    assert agent.replay.methods == ("insert_records", "memory_size", "sample_from_memory")


def test_graph_view_shows_each_component_with_its_replica_and_device():
    from harness.graph.visualize.model import GraphModel

    strategy = SyncReplicas(["cpu", "cpu"], ["update_from_batch"])
    multi = mdg.GraphExecutor(*mdg.dqn_graph(memory=True), backend="torch",
                              api_methods=mdg.dqn_methods(memory=True), strategy=strategy)
    model = GraphModel.from_assembly(multi.assembly, tower_of=strategy.tower_of)
    nodes = model.components
    assert nodes["dqn/replica_1/q_network"].tower == "replica 1"
    assert nodes["dqn/q_network"].tower == "replica 0" and nodes["dqn/q_network"].device == "cpu"
    assert nodes["dqn/memory"].tower is None and nodes["dqn/memory"].device is None
