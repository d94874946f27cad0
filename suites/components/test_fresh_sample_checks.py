"""Checks written after seeing the survivors of the seed-3011 mutation sample (reports/mutation/components.md):
any figure counting them is biased. Each states what the component documents."""

from __future__ import annotations

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.helpers import NStepAccumulator
from reference_agents.components.queues import BlockingQueue, FIFOQueue, Prefetcher

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.queues.blocking", "reference_agents.components.queues.fifo_queue",
                   "reference_agents.components.queues.prefetcher", "reference_agents.components.helpers.n_step",
                   "reference_agents.components.optimizers.sgd", "reference_agents.components.preprocessors.stack",
                   "reference_agents.components.policies.categorical", "reference_agents.components.policies.gaussian")


def test_put_refuses_records_whose_leaves_differ_in_batch_size():
    q = BlockingQueue(object(), capacity=4)  # the batch is checked before the executor is touched
    with pytest.raises(ValueError, match="sharing one batch size"):
        q.put({"x": np.zeros(2), "y": np.zeros(3)}, timeout=0.05)


@pytest.mark.parametrize("backend", selected_backends())
def test_the_queue_declares_its_counts_within_zero_and_the_capacity(backend):
    """The records taken by `enqueue_records` and given by `dequeue_records` number 0 (a full or an empty queue)
    to ``capacity``: their declared spaces say so."""
    ex = GraphExecutor(FIFOQueue(5), {"records": "[B]{x: int64[]}", "num_records": "int64[]"}, backend=backend)
    for space in (ex.apis["enqueue_records"].output_space, ex.apis["dequeue_records"].output_space[1]):
        assert (int(np.min(space.low)), int(np.max(space.high))) == (0, 5)
    assert int(ex.execute("dequeue_records", np.int64(2))[1]) == 0  # an empty queue: the declared low is reached


def test_a_running_prefetcher_is_alive():
    p = Prefetcher(lambda: np.zeros(1), depth=1)
    try:
        assert p.alive is True
    finally:
        p.close(timeout=2.0)
    assert p.alive is False


def test_flush_closes_windows_as_cut_short_and_starts_afresh():
    """Flushed windows bootstrap (not terminal, discount gamma^k); steps pushed afterwards open new windows."""
    acc = NStepAccumulator(3, 0.5)
    assert acc.push("s0", 0, 1.0, "s1", False) == [] and acc.push("s1", 1, 2.0, "s2", False) == []
    out = acc.flush()
    assert [(r["states"], r["terminals"], r["discounts"], r["rewards"]) for r in out] == \
        [("s0", False, 0.25, 2.0), ("s1", False, 0.5, 2.0)]
    assert acc.push("t0", 0, 4.0, "t1", True) == [{"states": "t0", "actions": 0, "rewards": 4.0, "next_states": "t1",
                                                   "terminals": True, "discounts": 0.5}]


def test_sgd_without_momentum_keeps_no_slot():
    from reference_agents.components.common import Dense
    from reference_agents.components.optimizers import SGD

    assert SGD(0.1, Dense(2)).slot_names() == ()
    assert SGD(0.1, Dense(2), momentum=0.5).slot_names() == ("momentum",)


def test_the_default_atari_pipeline_stacks_as_atari_frames_does():
    from reference_agents.components.preprocessors.stack import atari_preprocessing
    from reference_agents.environments import ATARI_FRAMES, ATARI_SIZE

    layers = atari_preprocessing(2)
    assert {"type": "frame_stack", "num_frames": ATARI_FRAMES, "batch_size": 2} in layers
    assert {"type": "resize", "width": ATARI_SIZE, "height": ATARI_SIZE} in layers


@pytest.mark.parametrize("backend", selected_backends())
def test_categorical_draws_follow_the_softmax(backend):
    """Gumbel-max draws of logits (0, 1, 2): chi-square against the softmax, with the draws the suite's level
    (alpha 1e-4, power 0.99) needs to see negated Gumbel noise (its probabilities 0.053, 0.246, 0.701); seeded."""
    from harness.testing import distributions as D
    from reference_agents.components.policies import CategoricalAdapter

    logits = np.array([0.0, 1.0, 2.0])
    p0 = np.exp(logits) / np.exp(logits).sum()
    n = D.sample_size_chi_square(p0, [0.053, 0.246, 0.701])
    ex = GraphExecutor(CategoricalAdapter(3), {"parameters": "float32[B,3]"}, backend=backend, seed=0,
                       api_methods=["sample_action"])
    draws = np.asarray(ex.execute("sample_action", np.tile(logits.astype(np.float32), (n, 1))))
    D.check_chi_square(D.Where("CategoricalAdapter", "sample_action", "", backend), draws, p0, what="softmax")


@pytest.mark.parametrize("backend", selected_backends())
def test_gaussian_draws_are_the_mean_plus_std_times_normal_noise(backend):
    """Standardised draws of an unbounded Gaussian are N(0, 1) (KS test at the suite's level with the draws that
    see a distance of 0.2, which noise divided instead of multiplied far exceeds); seeded."""
    import math

    from harness.testing import distributions as D
    from reference_agents.components.policies import GaussianAdapter

    n = D.sample_size_ks(0.2)
    ex = GraphExecutor(GaussianAdapter(1), {"parameters": "[B](float32[1], float32[1])"}, backend=backend, seed=0,
                       api_methods=["sample_action"])
    mean, log_std = np.full((n, 1), 0.5, np.float32), np.full((n, 1), -1.0, np.float32)
    draws = np.asarray(ex.execute("sample_action", (mean, log_std)))[:, 0]
    z = (draws - 0.5) / math.exp(-1.0)
    cdf = np.vectorize(lambda x: 0.5 * (1.0 + math.erf(x / math.sqrt(2.0))))
    D.check_ks(D.Where("GaussianAdapter", "sample_action", "", backend), z, cdf, what="N(0, 1)")


def test_clear_drops_the_open_windows():
    acc = NStepAccumulator(3, 0.5)
    acc.push("s0", 0, 1.0, "s1", False)
    acc.clear()
    assert [r["states"] for r in acc.push("t0", 0, 4.0, "t1", True)] == ["t0"]
    assert acc.flush() == []
