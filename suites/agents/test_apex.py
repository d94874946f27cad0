"""Ape-X coordination in one process (`InProcessActorExecutor`): configs, shards, the learner's priorities and
publications, faults and the ledger, ``spacegraph train --executor local``. The Ray runs are in ``suites/distributed``."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from harness.execution.actors import ActorFailure, Future, InProcessActorExecutor
from harness.testing import distributions as D
from reference_agents.agents.apex import ApexDriver, ApexWorker, HostRecordReplay, ReplayShard, load_apex_config
from reference_agents.agents.config import ConfigError
from reference_agents.components.explorations import apex_epsilons

ROOT = Path(__file__).resolve().parents[2]
APEX_CARTPOLE = ROOT / "reference_agents" / "configs" / "apex_cartpole.yaml"
DQN_CARTPOLE = ROOT / "reference_agents" / "configs" / "dqn_cartpole.yaml"
APEX_PONG = ROOT / "reference_agents" / "configs" / "apex_pong.yaml"


def small_config(**apex):
    """apex_cartpole with learning from the start (small batches) so that short runs learn and publish."""
    cfg, _ = load_apex_config(APEX_CARTPOLE, apex=apex)
    data = cfg.model_dump(by_alias=True)
    data["update"] = {"batch_size": 16, "start_after": 100, "every": 1, "repeats": 1}
    data["apex"].update(sample_steps=20, publish_every=5)
    return data


@pytest.fixture
def local():
    executor = InProcessActorExecutor()
    yield executor
    executor.shutdown()


def balanced(driver):
    ledger = driver.ledger()
    assert ledger["in_flight"] == 0
    assert ledger["produced"] == ledger["held"] + ledger["evicted"] + ledger["lost"], ledger
    tags = np.concatenate([s.call("held_tags").result() for s in driver.shards])
    assert tags.size == ledger["held"] and np.unique(tags).size == tags.size
    return ledger


# ---- configs ------------------------------------------------------------------------------------------
def test_a_dqn_config_is_an_apex_config_with_the_defaults():
    cfg, source = load_apex_config(DQN_CARTPOLE, apex={"workers": 3})
    assert cfg.agent == "apex" and cfg.apex.workers == 3 and cfg.apex.shards == 2 and source == str(DQN_CARTPOLE)
    dqn = cfg.dqn_config()
    assert dqn["agent"] == "dqn" and "apex" not in dqn and dqn["network"] == cfg.network.model_dump(by_alias=True)


def test_config_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "apex_bad.yaml"
    bad.write_text(APEX_CARTPOLE.read_text().replace("workers: 2,", "workers: 0,"))
    with pytest.raises(ConfigError, match=r"apex_bad.yaml.*\n.*apex.workers"):
        load_apex_config(bad)
    with pytest.raises(ConfigError, match="agent must be 'dqn' or 'apex'; got 'impala'"):
        load_apex_config({"agent": "impala"})
    with pytest.raises(ConfigError, match=r"apex.samples_in_flight.*greater than or equal to 1"):
        load_apex_config(APEX_CARTPOLE, apex={"samples_in_flight": 0})
    assert load_apex_config(APEX_CARTPOLE)[0].apex.samples_in_flight == 2


def test_workers_explore_with_apex_epsilons(local):
    driver = ApexDriver(small_config(workers=3), local)
    driver.start()
    try:
        got = [w.obj.agent.epsilon() for w in driver.workers]
        assert np.allclose(got, apex_epsilons(3, 0.4, 7.0), rtol=1e-6)
    finally:
        driver.close()


# ---- shards -------------------------------------------------------------------------------------------
PRIORITIES = np.array([0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
ALPHA, BETA, EPSILON = 0.7, 0.3, 1e-6


def check_record_replay_sampling(replay_cls=HostRecordReplay):
    """Draws of a shard's replay are ``p_i^alpha / sum p^alpha`` (chi-square at 1e-4, power 0.99 against alpha
    5% off) and weights ``(min p^alpha / p^alpha)^beta``."""
    q = (PRIORITIES + EPSILON) ** ALPHA
    q1 = (PRIORITIES + EPSILON) ** (ALPHA * 1.05)
    p0, p1 = q / q.sum(), q1 / q1.sum()
    n = D.sample_size_chi_square(p0, p1)
    replay = replay_cls(8, alpha=ALPHA, beta=BETA, epsilon=EPSILON, seed=3)
    k = len(PRIORITIES)
    replay.add({"states": np.arange(k, dtype=np.float32)[:, None], "actions": np.arange(k), "rewards": np.zeros(k),
                "terminals": np.zeros(k, bool), "next_states": np.zeros((k, 1), np.float32),
                "discounts": np.ones(k)}, PRIORITIES)
    slots = np.concatenate([replay.sample(64)[1] for _ in range(-(-n // 64))])
    D.check_chi_square(D.Where("HostRecordReplay", "sample", "slots"), slots, p0, what="p_i^alpha / sum_k p_k^alpha")
    records, slots, weights = replay.sample(256)
    assert np.array_equal(records["actions"], slots)
    assert np.allclose(weights, (q.min() / q[slots]) ** BETA, rtol=1e-4)


def test_record_replay_samples_in_proportion_to_priority():
    check_record_replay_sampling()


def test_record_replay_check_fails_when_alpha_is_ignored(monkeypatch):
    monkeypatch.setattr(HostRecordReplay, "_weighted", lambda self, p: np.asarray(p, np.float32))
    with pytest.raises(D.DistributionMismatch, match="p_i\\^alpha"):
        check_record_replay_sampling()


def test_a_uniform_shard_samples_uniformly_whatever_the_priorities():
    """``prioritized=False`` (a config's ``memory.type: replay``): draws uniform over the records held (chi-square
    at 1e-4 with power 0.99 against the alpha = 0.6 draws of the same priorities), weights 1, new priorities
    ignored."""
    k = len(PRIORITIES)
    uniform = np.full(k, 1.0 / k)
    q = (PRIORITIES + EPSILON) ** ALPHA
    n = D.sample_size_chi_square(uniform, q / q.sum())
    shard = ReplayShard("shard-0", capacity=8, seed=4, prioritized=False, alpha=ALPHA, beta=BETA)
    shard.add({"states": np.zeros((k, 1), np.float32), "actions": np.arange(k), "rewards": np.zeros(k),
               "terminals": np.zeros(k, bool), "next_states": np.zeros((k, 1), np.float32),
               "discounts": np.ones(k)}, PRIORITIES, np.arange(k))
    shard.update_priorities(np.arange(k), PRIORITIES[::-1] * 100)
    draws = [shard.sample(k) for _ in range(-(-n // k))]
    D.check_chi_square(D.Where("ReplayShard", "sample", "slots"), np.concatenate([d[1] for d in draws]), uniform,
                       what="uniform over the records held")
    assert all(np.array_equal(d[2], np.ones(k, np.float32)) for d in draws)


def test_shards_follow_the_memory_section(local):
    """memory.type replay: uniform shards; frames: the section's prioritized, compression and match_window, and
    frame_capacity split over the shards; form: graph refused by name."""
    uniform = ApexDriver(dict(small_config(), memory={"type": "replay", "capacity": 1000}), local)
    assert not ReplayShard(*uniform._shard_args(1)).store.prioritized
    assert ReplayShard(*ApexDriver(small_config(), local)._shard_args(0)).store.prioritized
    cfg, _ = load_apex_config(APEX_PONG, apex={"shards": 2})
    data = cfg.model_dump(by_alias=True)
    data["memory"].update(capacity=500, frame_capacity=900, match_window=77, prioritized=False)
    shard = ReplayShard(*ApexDriver(data, local)._shard_args(0))
    assert (shard.store.capacity, shard.store.index.frame_capacity, shard.store.index.window) == (250, 450, 77)
    assert not shard.store.prioritized
    data["memory"]["form"] = "graph"
    with pytest.raises(ConfigError, match="memory.form.*form: host"):
        load_apex_config(data)


def test_shard_counts_evictions_and_snapshots(tmp_path):
    shard = ReplayShard("shard-0", capacity=10, seed=0)
    records = {"states": np.zeros((15, 4), np.float32), "actions": np.zeros(15, np.int64),
               "rewards": np.zeros(15, np.float32), "terminals": np.zeros(15, bool),
               "next_states": np.zeros((15, 4), np.float32), "discounts": np.ones(15, np.float32)}
    stats = shard.add(records, np.ones(15), np.arange(15))
    assert (stats["size"], stats["added"], stats["evicted"]) == (10, 15, 5)
    assert sorted(shard.held_tags()) == list(range(5, 15))
    assert shard.sample(11) is None and shard.sample(4)[0]["states"].shape == (4, 4)
    shard.save(str(tmp_path / "s.npz"))
    fresh = ReplayShard("shard-0", capacity=10, seed=0)
    assert fresh.load(str(tmp_path / "s.npz"))["size"] == 10 and sorted(fresh.held_tags()) == list(range(5, 15))
    with pytest.raises(ValueError, match="shard-0.*cannot read the snapshot"):
        fresh.load(str(tmp_path / "missing.npz"))


# ---- the executor -------------------------------------------------------------------------------------
def test_in_process_actor_failures_and_restarts(local):
    handle = local.start("w", object, restarts=1)
    with pytest.raises(ActorFailure, match="'w' raised in nothing\\(\\).*has no method"):
        handle.call("nothing").result()
    local.kill(handle)
    with pytest.raises(ActorFailure) as info:
        handle.call("__repr__").result()
    assert info.value.died
    local.restart(handle)
    assert handle.incarnation == 1 and handle.call("__repr__").result()
    with pytest.raises(ActorFailure, match="no restarts left"):
        local.restart(handle)


# ---- the driver --------------------------------------------------------------------------------------
def test_learner_writes_priorities_back_and_publishes_with_one_put_each(local, monkeypatch):
    puts = []
    original = local.put
    monkeypatch.setattr(local, "put", lambda value: puts.append(1) or original(value))
    driver = ApexDriver(small_config(), local)
    try:
        stats = driver.run(num_steps=600)
        ledger = balanced(driver)
        learner = driver.learner
        assert stats.num_updates == learner.updates == driver.agent.updates > 0
        # every learned batch's priorities went back to the shard it came from (calls run at once here)
        updates = [s.call("stats").result()["priority_updates"] for s in driver.shards]
        assert all(u > 0 for u in updates) and sum(updates) == ledger["learned"]
        # one put per publication, every publish_every updates, however many workers receive it
        assert len(puts) == learner.version == 1 + learner.updates // driver.config.apex.publish_every
        assert {w.obj.weights_version for w in driver.workers} == {learner.version}
        # throttled to the update schedule: 1 update per env step after start_after
        assert learner.updates <= driver._due(driver.total_steps)
    finally:
        driver.close()


@pytest.mark.parametrize("every", [1, 3])
def test_the_learner_sends_a_shards_priorities_every_few_batches_in_the_order_learned(local, monkeypatch, every):
    calls = []
    original = ReplayShard.update_priorities

    def counting(self, slots, priorities):
        calls.append((self.name, np.asarray(slots).copy(), np.asarray(priorities).copy()))
        return original(self, slots, priorities)

    monkeypatch.setattr(ReplayShard, "update_priorities", counting)
    learned = []
    driver = ApexDriver(small_config(priority_every=every), local)
    try:
        driver.start()
        assert driver.learner.priority_every == every
        real_update = driver.agent.update

        def recording(batch):
            out = real_update(batch)
            learned.append(np.abs(np.asarray(out["td_errors"], np.float32)))
            return out

        monkeypatch.setattr(driver.agent, "update", recording)
        driver.run(num_steps=600)
        ledger = balanced(driver)
        batch = driver.config.update.batch_size
        sizes = [len(slots) for _, slots, _ in calls]
        # after the run's pause nothing is held back: every learned record's priority reached a shard
        assert sum(sizes) == ledger["learned"] == len(learned) * batch > 0
        per_shard = {name: [len(sl) for n, sl, _ in calls if n == name] for name, _, _ in calls}
        for name, counts in per_shard.items():
            # `every` batches per call, but the last call of each shard (sent at the pause) may hold fewer
            assert all(c == every * batch for c in counts[:-1]) and 0 < counts[-1] <= every * batch, (name, counts)
        # the priorities sent are the learned ones, in the order learned (a slot sampled twice keeps its last)
        assert sorted(np.concatenate([p for _, _, p in calls]).tolist()) == \
            sorted(np.concatenate(learned).tolist())
    finally:
        driver.close()


def test_the_learner_refuses_a_bad_priority_every_or_samples_in_flight():
    from reference_agents.agents.apex.learner import ApexLearner

    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="priority_every must be a positive int"):
            ApexLearner(object(), [], 16, 4, 5, lambda v: v, priority_every=bad)
        with pytest.raises(ValueError, match="samples_in_flight must be a positive int"):
            ApexLearner(object(), [], 16, 4, 5, lambda v: v, samples_in_flight=bad)


class GatedFuture(Future):
    """A future that answers once its gate opens."""

    def __init__(self, value, gate):
        self.value, self.gate = value, gate

    def result(self, timeout=None):
        if not self.gate.wait(timeout):
            raise TimeoutError("gated")
        return self.value

    def done(self):
        return self.gate.is_set()

    def as_argument(self):
        return self.value


class GatedShard:
    """A shard handle whose `sample` answers at once, or (``slow``) only when the test opens ``gate``; it logs
    the calls it gets."""

    def __init__(self, index, log, gate):
        self.index, self.log, self.gate, self.incarnation = index, log, gate, 0

    def call(self, method, *args):
        self.log.append((method, self.index))
        if method == "sample":
            records = {"rewards": np.zeros(2)}
            return GatedFuture((records, np.array([0, 1]), np.ones(2, np.float32)), self.gate)
        opened = threading.Event()
        opened.set()
        return GatedFuture(None, opened)


def gated_wait(futures, num_returns, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not any(f.done() for f in futures):
        time.sleep(0.001)
    ready = [f for f in futures if f.done()]
    return ready, [f for f in futures if f not in ready]


def test_the_learner_keeps_k_samples_in_flight_and_learns_whichever_answers(monkeypatch):
    from reference_agents.agents.apex.learner import ApexLearner

    log = []
    slow_gate, open_gate = threading.Event(), threading.Event()
    open_gate.set()
    shards = [GatedShard(0, log, slow_gate), GatedShard(1, log, open_gate)]

    class Agent:
        def update(self, batch):
            log.append(("learned", None))
            return {"loss": 0.0, "td_errors": np.zeros(2)}

        def get_weights(self):
            return {}

    learner = ApexLearner(Agent(), shards, 2, prefetch=2, publish_every=10**6, put=lambda v: v,
                          samples_in_flight=2, wait=gated_wait)
    learner.start()
    learner.active.set()
    try:
        deadline = time.monotonic() + 30   # a bound on a hang, not a timing assertion
        while log.count(("learned", None)) < 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        events = list(log)
    finally:
        slow_gate.set()
        learner.stop()
    # both calls went out before anything was learned: shard 0's (slow) and shard 1's
    assert events[:2] == [("sample", 0), ("sample", 1)], events[:5]
    # shard 0 has not answered, yet the learner learned from shard 1's batches meanwhile, one call sent per answer
    assert events.count(("learned", None)) >= 5, events[:10]
    assert events.count(("sample", 0)) == 1
    samples = [e for e in events if e[0] == "sample"]
    assert len(samples) <= 2 + events.count(("learned", None)) + learner.queue.maxsize + 1
    assert learner.records_learned == 2 * learner.updates


def test_a_worker_whose_environment_raises_is_restarted(local, monkeypatch):
    calls = {"n": 0}
    original = ApexWorker.sample

    def flaky(self, num_steps):
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("the environment crashed")
        return original(self, num_steps)

    monkeypatch.setattr(ApexWorker, "sample", flaky)
    stream = io.StringIO()
    driver = ApexDriver(small_config(), local, stream=stream)
    try:
        driver.run(num_steps=400)
        balanced(driver)
    finally:
        driver.close()
    assert len(driver.worker_failures) == 1 and "the environment crashed" in driver.worker_failures[0]["error"]
    failed = driver.workers[[w.name for w in driver.workers].index(driver.worker_failures[0]["name"])]
    assert failed.incarnation == 1 and failed.obj.weights_version == driver.learner.version
    assert "failed at env step" in stream.getvalue()


def test_a_dead_shard_comes_back_from_its_snapshot(local, tmp_path):
    config = small_config(snapshot_every=100)
    stream = io.StringIO()
    driver = ApexDriver(config, local, snapshot_dir=str(tmp_path), stream=stream)
    try:
        driver.run(num_steps=300)
        local.kill(driver.shards[0])
        driver.run(num_steps=300)
        ledger = balanced(driver)
    finally:
        driver.close()
    failure, = driver.shard_failures
    assert failure["name"] == "shard-0" and failure["restored"] > 0
    assert ledger["lost"] == failure["lost"] >= 0 and ledger["shards"][0]["deaths"] == 1
    assert "replay shard 'shard-0' died" in stream.getvalue() and "from its snapshot" in stream.getvalue()


def test_a_late_report_of_a_handled_shard_death_restarts_nothing(local, tmp_path, monkeypatch):
    """The learner's prefetch thread can see a shard's death after the driver took it up but before the restart
    moved the incarnation on (seen in CI on Ray: two failures for one kill). That report, and the late failure
    of the old incarnation's sample call, must neither restart the shard a second time nor leave it unsampled."""
    config = small_config(snapshot_every=100)
    driver = ApexDriver(config, local, snapshot_dir=str(tmp_path), stream=io.StringIO())
    restart = local.restart
    late = []

    def restart_with_late_reports(handle):
        if handle is not driver.shards[0]:
            return restart(handle)
        # the old incarnation's sample calls fail while the restart is under way and after it
        incarnation = handle.incarnation
        driver.learner.shard_failed(0, incarnation, ActorFailure(handle.name, "sample", True, "during"))
        restart(handle)
        mark_live = driver.learner.mark_live

        def then_a_late_failure(i):
            mark_live(i)
            driver.learner.shard_failed(0, incarnation, ActorFailure(handle.name, "sample", True, "after"))
            late.append(incarnation)

        monkeypatch.setattr(driver.learner, "mark_live", then_a_late_failure)

    try:
        driver.run(num_steps=300)
        monkeypatch.setattr(local, "restart", restart_with_late_reports)
        local.kill(driver.shards[0])
        driver.run(num_steps=300)
        ledger = balanced(driver)
    finally:
        driver.close()
    assert late == [0]
    failure, = driver.shard_failures
    assert failure["name"] == "shard-0" and ledger["shards"][0]["deaths"] == 1
    assert driver.shards[0].incarnation == 1 and driver.learner.shard_live == [True, True]


def test_a_temporary_snapshot_folder_is_removed_on_close_and_a_given_one_kept(local, tmp_path):
    own = ApexDriver(small_config(snapshot_every=100), local)
    given = ApexDriver(small_config(snapshot_every=100), local, snapshot_dir=str(tmp_path))
    try:
        own.run(num_steps=200)
        given.run(num_steps=200)
        made = Path(own.snapshot_dir)
        assert made.is_dir() and any(made.iterdir()), "the driver's own folder holds the shards' snapshots"
    finally:
        own.close()
        given.close()
    assert not made.exists(), f"ApexDriver.close left its temporary snapshot folder {made}"
    assert any(tmp_path.iterdir()), "a snapshot_dir the caller gave was emptied"


def test_spacegraph_train_executor_local_and_resume(tmp_path, capsys):
    from spacegraph.cli import main

    config = tmp_path / "apex_small.yaml"
    import yaml

    config.write_text(yaml.safe_dump(small_config()))
    out = tmp_path / "run"
    assert main(["train", str(config), "--executor", "local", "--workers", "2", "--shards", "2", "--steps", "300",
                 "--eval-every", "150", "--screen-episodes", "2", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "2 workers x 1 envs, 2 shards" in printed and "lost" in printed
    assert (out / "checkpoint" / "shards" / "shard-1.npz").exists() and (out / "metrics.csv").exists()
    from reference_agents.training.apex import saved_executor_kind

    assert saved_executor_kind(out) == "local"   # the resume below runs on it without --executor
    import json

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # the learner's mean gradient norm over the updates since the row before
    learned = [r for before, r in zip([{"updates": 0}, *rows], rows) if r["updates"] > before["updates"]]
    assert learned and all(r["grad_norm"] > 0 and r["policy_lag"] is None for r in learned)
    assert main(["train", "--resume", str(out), "--steps", "450", "--quiet"]) == 0
    import re

    assert re.search(r"env steps\s+4[5-9]\d of 450", capsys.readouterr().out)  # whole sample calls: <= 20 over
    assert main(["train", str(DQN_CARTPOLE), "--workers", "2"]) == 2
    assert "give --executor ray (or local)" in capsys.readouterr().err


def test_resume_without_backend_sets_the_threads_of_the_saved_backend(tmp_path, monkeypatch):
    import yaml

    import reference_agents.training as training
    from spacegraph.cli import main

    config = tmp_path / "apex_tf.yaml"
    config.write_text(yaml.safe_dump(dict(small_config(), backend="tf")))
    out = tmp_path / "run"
    assert main(["train", str(config), "--executor", "local", "--steps", "150", "--eval-every", "150",
                 "--screen-episodes", "1", "--out", str(out), "--quiet"]) == 0
    calls = []
    monkeypatch.setattr(training, "set_framework_threads", lambda backend, threads: calls.append(backend) or True)
    assert main(["train", "--resume", str(out), "--steps", "200", "--quiet"]) == 0
    assert calls == ["tf"], f"resuming a TF run set the threads of {calls}"


def test_frame_stacks_travel_as_distinct_frames_once():
    from reference_agents.agents.apex.transport import PACKED, pack_records, unpack_records

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (12, 6, 5), dtype=np.uint8)       # one env's frame sequence
    states = np.stack([np.moveaxis(frames[t:t + 4], 0, -1) for t in range(6)])           # [6, 6, 5, 4]
    next_states = np.stack([np.moveaxis(frames[t + 3:t + 7], 0, -1) for t in range(6)])  # 3-step targets
    records = {"states": states, "next_states": next_states, "actions": np.arange(6), "rewards": np.zeros(6),
               "terminals": np.zeros(6, bool), "discounts": np.ones(6)}
    packed = pack_records(records)
    assert packed[PACKED]["frames"].shape == (12, 6, 5)                # 12 distinct frames, not 2 * 6 * 4
    back = unpack_records(packed)
    for key in records:
        assert np.array_equal(back[key], records[key]), key
    vectors = {"states": np.zeros((3, 4), np.float32), "actions": np.zeros(3)}
    assert pack_records(vectors) is vectors and unpack_records(vectors) is vectors


def test_a_worker_replaced_between_calls_is_noticed(local):
    """An engine may restart a crashed actor before any call fails (Ray does, for calls not yet sent): the new
    object's instance token gives it away, and it gets the weights and a new seed as after a failure."""
    driver = ApexDriver(small_config(), local)
    try:
        driver.run(num_steps=200)
        handle = driver.workers[0]
        handle.obj = handle.factory(*handle.args, **handle.kwargs)   # what a silent restart leaves
        driver.run(num_steps=200)
        balanced(driver)
    finally:
        driver.close()
    assert [f["name"] for f in driver.worker_failures] == ["worker-0"]
    assert "replaced" in driver.worker_failures[0]["error"] and handle.obj.weights_version == driver.learner.version
