"""Replays inside the loop a learner builds: sample, compute priorities from the sample, update them.

A spec feeds every API argument from outside, so it never builds a memory whose arguments come from a graph
function that needs the memory itself (the slots of its own draw, priorities computed from its own records).
The agents build exactly that; a component there that waited for those spaces before creating its variables
(``@api(must_be_complete=True)`` where False is declared) could never be built. Here a small root does it, and
the tests check what the loop did. Also: the in-graph `FrameReplay`'s dead transitions under priority updates,
frames of one axis, and `PrioritizedReplay`'s declared slot bounds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, api, graph_fn
from harness.graph.build import _space_of
from harness.testing.plugin import selected_backends
from reference_agents.components.memories import FrameIndex, FrameReplay, PrioritizedReplay
from reference_agents.components.memories.frame_replay import TRANSITION_SPACE

#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.memories.replay_memory",
                   "reference_agents.components.memories.segment_tree",
                   "reference_agents.components.memories.prioritized_replay",
                   "reference_agents.components.memories.frame_replay")


class Learner(Component):
    """Draws ``num_records``, gives each drawn slot the priority ``key + 1`` of its record, updates them."""

    def __init__(self, memory: Component, key: str) -> None:
        self.memory, self.key = memory, key
        super().__init__(memory, scope="learner")

    @api
    def learn(self, num_records: Any) -> Any:
        records, slots, weights = self.memory.get_records(num_records)
        priorities = self._graph_fn_priorities(records)
        self.memory.update_records(slots, priorities)
        return slots, priorities

    @graph_fn
    def _graph_fn_priorities(self, F: Any, records: Any) -> Any:
        return F.cast(records[self.key], "float32") + 1.0


class PrioritizedLearner(Learner):
    @api
    def insert_records(self, records: Any) -> Any:
        return self.memory.insert_records(records)


class FrameLearner(Learner):
    @api
    def insert(self, frame_slots: Any, frames: Any, frame_prevs: Any, transitions: Any, dead_slots: Any) -> Any:
        return self.memory.insert(frame_slots, frames, frame_prevs, transitions, dead_slots)


FRAME_SPACES = {"frame_slots": "int64[B]", "frames": "uint8[B,3,3]", "frame_prevs": "int64[B]",
                "transitions": TRANSITION_SPACE, "dead_slots": "int64[B]", "indices": "int64[B]",
                "num_records": "int64[]", "priorities": "float32[B]"}


def spaces_of(*names: str, **changed: str) -> dict:
    return {k: changed.get(k, v) for k, v in FRAME_SPACES.items() if k in names}


INSERT = ("frame_slots", "frames", "frame_prevs", "transitions", "dead_slots")


def frame_records(n: int, start: int = 0, frame_shape: tuple[int, ...] = (3, 3), stack: int = 2) -> dict:
    """``n`` records of one episode of constant frames ``start, start + 1, ...``; action ``i % 3`` each."""
    frames = np.stack([np.full(frame_shape, start + k, np.uint8) for k in range(n + stack)], -1)
    return {"states": np.stack([frames[..., i:i + stack] for i in range(n)]),
            "next_states": np.stack([frames[..., i + 1:i + 1 + stack] for i in range(n)]),
            "actions": np.arange(n, dtype=np.int64) % 3, "rewards": np.arange(n, dtype=np.float32),
            "terminals": np.zeros(n, bool), "discounts": np.full(n, 0.9, np.float32)}


@pytest.mark.parametrize("backend", selected_backends())
def test_prioritized_replay_builds_in_a_learner_and_takes_its_priorities(backend: str) -> None:
    replay = PrioritizedReplay(6, alpha=1.0, epsilon=1e-6)
    ex = GraphExecutor(PrioritizedLearner(replay, "a"), {"records": "[B]{s: float32[2], a: int64[](0,3)}",
                                                         "num_records": "int64[]"}, backend=backend, seed=0)
    ex.execute("insert_records", {"s": np.zeros((6, 2), np.float32), "a": np.array([0, 1, 2, 3, 0, 1])})
    slots, priorities = (np.asarray(x) for x in ex.execute("learn", np.int64(4)))
    np.testing.assert_array_equal(priorities, np.array([0, 1, 2, 3, 0, 1])[slots] + 1.0)
    leaves = ex.get_weights()["learner/prioritized_replay/sum_tree/tree"][8:14]
    np.testing.assert_allclose(leaves[slots], priorities + 1e-6, rtol=1e-6)  # alpha 1: p = |priority| + eps


@pytest.mark.parametrize("backend", selected_backends())
def test_frame_replay_builds_in_a_learner_and_takes_its_priorities(backend: str) -> None:
    index = FrameIndex(8, (3, 3), 2, frame_capacity=20)
    ex = GraphExecutor(FrameLearner(FrameReplay(8, 2, frame_capacity=20, alpha=1.0, epsilon=1e-6), "actions"),
                       spaces_of(*INSERT, "num_records"), backend=backend, seed=0)
    plan = index.add(frame_records(5))
    ex.execute("insert", plan.frame_slots, plan.frames, plan.frame_prevs, plan.transitions, plan.dead)
    slots, priorities = (np.asarray(x) for x in ex.execute("learn", np.int64(4)))
    assert set(slots.tolist()) <= set(range(5))
    np.testing.assert_array_equal(priorities, slots % 3 + 1.0)
    leaves = ex.get_weights()["learner/frame_replay/transitions/sum_tree/tree"][8:16]
    np.testing.assert_allclose(leaves[slots], priorities + 1e-6, rtol=1e-6)


@pytest.mark.parametrize("backend", selected_backends())
def test_updating_a_dead_transition_leaves_the_weights_of_the_live_ones_alone(backend: str) -> None:
    """A dead transition keeps sum 0 and min +inf under a priority update: it is never drawn, and the importance
    weights stay ``(min over live p / p)^beta`` (here: live slots 0 and 2 at p 3 and 1, beta 1)."""
    index = FrameIndex(4, (3, 3), 2, frame_capacity=20)
    ex = GraphExecutor(FrameReplay(4, 2, frame_capacity=20, alpha=1.0, beta=1.0, epsilon=1e-6),
                       spaces_of(*INSERT, "indices", "priorities", "num_records"), backend=backend, seed=0)
    plan = index.add(frame_records(3))
    ex.execute("insert", plan.frame_slots, plan.frames, plan.frame_prevs, plan.transitions, np.array([1]))
    ex.execute("update_records", np.array([0, 1]), np.array([3.0, 0.1], np.float32))
    _, slots, weights = (np.asarray(x) if not isinstance(x, dict) else x for x in ex.execute("get_records",
                                                                                             np.int64(16)))
    assert set(slots.tolist()) == {0, 2}
    np.testing.assert_allclose(weights, np.where(slots == 0, 1.0 / 3.0, 1.0), rtol=1e-5)


@pytest.mark.parametrize("backend", selected_backends())
def test_frame_replay_takes_frames_of_one_axis(backend: str) -> None:
    """Frames need one axis or more (``uint8[B,128]``: stacks of RAM observations), not two."""
    index = FrameIndex(4, (5,), 3, frame_capacity=12)
    spaces = spaces_of(*INSERT, "indices", frames="uint8[B,5]")
    ex = GraphExecutor(FrameReplay(4, 3, frame_capacity=12), spaces, backend=backend, seed=0,
                       api_methods=["insert", "get_records_at"])
    records = frame_records(3, start=7, frame_shape=(5,), stack=3)
    plan = index.add(records)
    ex.execute("insert", plan.frame_slots, plan.frames, plan.frame_prevs, plan.transitions, plan.dead)
    got = ex.execute("get_records_at", plan.slots)
    for key in ("states", "next_states", "actions"):
        np.testing.assert_array_equal(np.asarray(got[key]), records[key], err_msg=key)


@pytest.mark.parametrize("backend", selected_backends())
def test_prioritized_replay_declares_the_slots_it_can_return(backend: str) -> None:
    """The slots of `get_records` are declared ``int64[B](0, capacity - 1)``: what a consumer sizing a one-hot
    or a gather by the space relies on (spec build checks compare spaces without their bounds)."""
    ex = GraphExecutor(PrioritizedReplay(6), {"records": "[B]{a: int64[]}", "num_records": "int64[]"},
                       backend=backend, seed=0, api_methods=["insert_records", "get_records"])
    slots_space = ex.apis["get_records"].output_space[1]
    assert (int(np.min(slots_space.low)), int(np.max(slots_space.high))) == (0, 5)


def late_spaces(ex: GraphExecutor) -> dict[int, tuple[Component, dict]]:
    """Every component of the build with the spaces its API methods received, by argument (the build's own
    `check_input_spaces` call sees only those known before the component's variables; arguments of
    ``must_be_complete=False`` methods may arrive later)."""
    out: dict[int, tuple[Component, dict]] = {}
    for trace in ex.assembly.traces.values():
        for call in trace.calls:
            spaces = out.setdefault(id(call.component), (call.component, {}))[1]
            for arg, value in call.args.items():
                space = _space_of(value)  # as the build computes it
                if space is not None:
                    spaces.setdefault(arg, space)
    return out


@pytest.mark.parametrize("backend", selected_backends())
def test_every_space_a_tree_or_memory_receives_inside_a_replay_passes_its_own_check(backend: str) -> None:
    """The trees and the memory of a replay take slots and masses computed inside the replay, after their
    variables exist: those spaces must still be what their own `check_input_spaces` accepts (``masses``
    ``float32[B]``, ``indices`` ``int64[B]``, ...)."""
    for root, spaces in ((PrioritizedLearner(PrioritizedReplay(6), "a"),
                          {"records": "[B]{s: float32[2], a: int64[](0,3)}", "num_records": "int64[]"}),
                         (FrameLearner(FrameReplay(8, 2, frame_capacity=20), "actions"),
                          spaces_of(*INSERT, "num_records"))):
        ex = GraphExecutor(root, spaces, backend=backend, seed=0)
        checked = 0
        for component, received in late_spaces(ex).values():
            if component is not root:
                component.check_input_spaces(received)
                checked += 1
        assert checked >= 4  # the replay, its memory and both trees (and the frame replay)
