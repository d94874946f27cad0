"""The in-graph `FrameReplay` against the host form, and the frame replay in agents.

The tests of `FrameIndex` and `HostFrameReplay` alone are in ``suites/components/test_host_frame_replay.py``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from reference_agents.components.memories import FrameIndex, FrameReplay, HostFrameReplay
from reference_agents.oracles.frame_replay import FullStackReplay, atari_like_records, stack_records
from suites.frame_replay_checks import assert_layout, assert_valid_equal_oracle

BACKENDS = [b for b in os.environ.get("SPACEGRAPH_BACKENDS", "tf,torch").split(",") if b]




@pytest.mark.parametrize("backend", BACKENDS)
def test_in_graph_form_rebuilds_what_the_host_form_does(backend):
    from harness.execution.executor import GraphExecutor
    from reference_agents.components.memories.frame_replay import TRANSITION_SPACE

    capacity, stack = 16, 4
    index = FrameIndex(capacity, (3, 3), stack, frame_capacity=30, match_window=16)
    host = HostFrameReplay(capacity, (3, 3), stack, frame_capacity=30, match_window=16)
    graph = GraphExecutor(FrameReplay(capacity, stack, frame_capacity=30),
                          {"frame_slots": "int64[B]", "frames": "uint8[B,3,3]", "frame_prevs": "int64[B]",
                           "transitions": TRANSITION_SPACE, "dead_slots": "int64[B]", "indices": "int64[B]",
                           "num_records": "int64[]", "priorities": "float32[B]"}, backend=backend, seed=0)
    rows = atari_like_records(np.random.default_rng(6), 3, 30, 3, palette=3)
    oracle = FullStackReplay(capacity)
    for i in range(0, len(rows), 5):
        batch = stack_records(rows[i:i + 5])
        plan = index.add(batch)
        host.add(batch)
        oracle.add(rows[i:i + 5])
        graph.execute("insert", plan.frame_slots, plan.frames, plan.frame_prevs, plan.transitions, plan.dead)
    valid = np.flatnonzero(index.valid)
    assert valid.size and not index.valid.all()  # some transitions died with their frames
    got = graph.execute("get_records_at", valid)
    for key, value in oracle.records_at(valid).items():
        np.testing.assert_array_equal(np.asarray(got[key]), value, err_msg=key)
    records, slots, weights = graph.execute("get_records", np.int64(64))
    slots = np.asarray(slots)
    assert index.valid[slots].all()  # dead transitions are never drawn
    for key, value in oracle.records_at(slots).items():
        np.testing.assert_array_equal(np.asarray(records[key]), value, err_msg=key)
    dead = np.flatnonzero(~index.valid)[:2]
    graph.execute("update_records", np.concatenate([slots[:3], dead]), np.ones(3 + dead.size, np.float32))
    _, again, _ = graph.execute("get_records", np.int64(256))
    assert index.valid[np.asarray(again)].all()  # a priority update does not revive a dead transition


def test_worker_samples_go_into_the_host_store_with_frames_once():
    from reference_agents.agents import DQNAgent
    from reference_agents.workers import VectorEnvWorker

    import yaml

    from reference_agents.agents import CONFIG_DIR

    with open(os.path.join(CONFIG_DIR, "dqn_pong.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg["memory"]["capacity"] = 256
    agent = DQNAgent(cfg, backend=BACKENDS[0], seed=0)
    worker = VectorEnvWorker.for_agent(agent, num_envs=2, observe=False, update=False, compute_priorities=True)
    store = HostFrameReplay(512, (84, 84), 4, seed=0)
    oracle = FullStackReplay(512)
    total = 0
    for _ in range(3):
        batch = worker.sample(40)
        rows = [{k: batch.records[k][i] for k in batch.records} for i in range(len(batch.records["actions"]))]
        store.add(batch.records, batch.priorities)
        oracle.add(rows)
        total += len(rows)
    assert store.size == total
    assert_valid_equal_oracle(store, oracle)
    assert store.index.frames_written <= total + 2 * 4 * 2 + 8  # one frame per step (+ stacks met mid-window)


def _pong_config(**memory):
    import yaml

    from reference_agents.agents import CONFIG_DIR

    with open(os.path.join(CONFIG_DIR, "dqn_pong.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg["memory"].update(memory)
    cfg["update"] = {"batch_size": 8, "start_after": 0, "every": 4, "repeats": 1}
    return cfg


@pytest.mark.parametrize("form,compression", [("host", None), ("host", "lz4"), ("graph", None)])
def test_agent_checkpoint_keeps_the_frame_replay(tmp_path, form, compression):
    from reference_agents.agents import DQNAgent

    backend = BACKENDS[-1]
    agent = DQNAgent(_pong_config(capacity=64, form=form, compression=compression), backend=backend, seed=0)
    rows = atari_like_records(np.random.default_rng(7), 2, 30, 3, frame_shape=(84, 84), palette=2)
    agent.observe_transitions(stack_records(rows))
    agent.flush()
    agent.update()
    size = agent.memory_size()
    agent.save_checkpoint(str(tmp_path))
    loaded = DQNAgent.load_checkpoint(str(tmp_path))
    assert loaded.memory_size() == size > 0
    index = getattr(loaded.replay, "index", None) or loaded.replay.store.index
    np.testing.assert_array_equal(index.valid, (getattr(agent.replay, "index", None) or agent.replay.store.index).valid)
    if form == "host":
        slots = np.flatnonzero(index.valid)
        for key, value in agent.replay.store.records_at(slots).items():
            np.testing.assert_array_equal(loaded.replay.store.records_at(slots)[key], value)
    else:
        w0, w1 = agent.get_weights(everything=True), loaded.get_weights(everything=True)
        np.testing.assert_array_equal(w0["dqn/memory/frames"], w1["dqn/memory/frames"])
    loaded.update()


def test_agent_config_errors_name_the_memory_key():
    from reference_agents.agents import ConfigError, DQNAgent

    with pytest.raises(ConfigError, match="memory.compression"):
        DQNAgent(_pong_config(form="graph", compression="lz4"), backend=BACKENDS[0])
    with pytest.raises(ConfigError, match="memory.capacity"):
        DQNAgent(_pong_config(capacity=3), backend=BACKENDS[0])
    with pytest.raises(ConfigError, match="memory.compression"):
        DQNAgent(_pong_config(compression="zip"), backend=BACKENDS[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_agent_samples_in_its_backends_layout(backend, monkeypatch):
    from reference_agents.agents import DQNAgent
    from reference_agents.agents.dqn.replay_stores import BATCH_LAYOUTS

    agent = DQNAgent(_pong_config(capacity=64, form="host"), backend=backend, seed=0)
    assert agent.replay.layout == BATCH_LAYOUTS[backend] == {"tf": "nhwc", "torch": "nchw_view"}[backend]
    rows = atari_like_records(np.random.default_rng(10), 2, 30, 3, frame_shape=(84, 84), palette=2)
    agent.observe_transitions(stack_records(rows))
    agent.flush()
    seen = []
    execute = agent.executor.execute

    def spy(name, *args):
        if name == "update_from_batch":
            seen.append(args[0])
        return execute(name, *args)

    monkeypatch.setattr(agent.executor, "execute", spy)
    agent.update()
    assert seen
    assert_layout(seen[0], BATCH_LAYOUTS[backend])
