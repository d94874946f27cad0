"""`FrameReplay`: the in-graph form of the frame replay (each frame stored once, stacks rebuilt on sampling)."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, forward, graph_fn
from harness.spaces import Dict, FloatBox, IntBox, Space, parse

from reference_agents.components.memories.frame_index import check_frame_arguments
from reference_agents.components.memories.prioritized_replay import PrioritizedReplay
from reference_agents.components.memories.replay_memory import is_count, is_index_batch

#: The transition fields the graph stores per slot (frame slots of both stacks plus the folded step).
TRANSITION_SPACE = "[B]{state: int64[], target: int64[], actions: int64[], rewards: float32[], " \
                   "terminals: bool[], discounts: float32[]}"


class FrameReplay(Component):
    """A replay of frame-stack transitions in graph variables, storing each frame once.

    The host-side `FrameIndex` (kept by the agent, shared with `HostFrameReplay`) decides
    where every frame and transition goes and hands `insert` a write plan; the graph holds
    the data and does everything per sample: drawing slots, rebuilding the ``states`` and
    ``next_states`` stacks (``uint8[B,H,W,D]``, oldest frame first) by following ``prev``
    links from each stack's newest frame (a slot whose ``prev`` is itself pads the stack
    with its own frame, as an episode start does), importance weights and priority
    updates, so ``update_from_memory`` stays one call.

    Transitions live in a `PrioritizedReplay` sub-component (``transitions``) whose
    records are ``{state, target, actions, rewards, terminals, discounts}`` (``state`` and
    ``target`` are frame slots); its slots, priorities and weights are exactly the
    prioritized replay's. Uniform replay is the same with ``alpha = beta = 0``. Transitions
    whose frames were overwritten (``dead_slots``) get leaves 0 (sum) and +inf (min), so
    they are never drawn and do not count in the weights' minimum; a priority update
    keeps a dead transition's leaf at 0.

    Variables: ``frames`` (``uint8[frame_capacity, H, W]``), ``prevs`` (``int64[frame_capacity]``)
    and the ``transitions`` replay's (``transitions/memory/records/...``, trees, ``max_priority``).
    They are allocated at build, zero-filled: the in-graph form suits capacities whose frames fit
    beside the learner at build (see docs/architecture.md); Atari-scale replay uses `HostFrameReplay`.

    Args:
        capacity: transitions held, at least ``stack``.
        stack: frames per stack ``D``; the frames' shape comes from the ``frames`` input space.
        frame_capacity: frame slots (default ``capacity + capacity // 200 + 2 * stack``).
        prioritized: proportional prioritized sampling; False: uniform over valid transitions.
        alpha, beta, epsilon: as `PrioritizedReplay` (used with ``prioritized``).
        compression: must be None: compressed frames exist only in the host-side store.
        scope: the component's name.

    Raises:
        ValueError: naming the argument (``stack``, ``capacity``, ``frame_capacity``, ``compression``, ...).
    """

    spec_default_only = {"compression": "only None is valid here (any other value is refused); compression is "
                                         "HostFrameReplay's, specced there"}

    def __init__(self, capacity: int, stack: int = 4, frame_capacity: int | None = None, prioritized: bool = True,
                 alpha: float = 0.6, beta: float = 0.4, epsilon: float = 1e-6, compression: str | None = None,
                 scope: str = "frame_replay") -> None:
        if compression is not None:
            raise ValueError(f"FrameReplay: compression is only for the host-side store (HostFrameReplay); the "
                             f"in-graph form keeps frames uncompressed in a variable; got compression={compression!r}")
        capacity, stack, frame_capacity, _ = check_frame_arguments("FrameReplay", capacity, stack, frame_capacity)
        self.replay = PrioritizedReplay(capacity, alpha if prioritized else 0.0, beta if prioritized else 0.0,
                                        epsilon, scope="transitions")
        super().__init__(self.replay, scope=scope)
        self.capacity, self.stack, self.frame_capacity = capacity, stack, frame_capacity
        self.prioritized = bool(prioritized)
        self.frame_shape: tuple[int, ...] = ()
        self.frames: Any = None
        self.prevs: Any = None

    def check_input_spaces(self, input_spaces: dict[str, Space]) -> None:
        """``frames`` ``uint8[B,*frame]``; slots and counts ints; ``transitions`` `TRANSITION_SPACE`."""
        space = input_spaces.get("frames")
        if space is not None and not (space.dtype.name == "uint8" and space.has_batch_rank
                                      and not space.has_time_rank and len(space.shape) >= 1):
            raise self.space_mismatch("frames", "a batch of uint8 frames (uint8[B,H,W])", space)
        for arg in ("frame_slots", "frame_prevs", "dead_slots", "indices"):
            if arg in input_spaces and not is_index_batch(input_spaces[arg]):
                raise self.space_mismatch(arg, "a batch of scalar ints (int64[B])", input_spaces[arg])
        if "num_records" in input_spaces and not is_count(input_spaces["num_records"]):
            raise self.space_mismatch("num_records", "a scalar int without extra ranks (int64[])",
                                      input_spaces["num_records"])
        space = input_spaces.get("transitions")
        if space is not None and not (isinstance(space, Dict) and sorted(space.keys()) ==
                                      sorted(parse(TRANSITION_SPACE).keys())):
            raise self.space_mismatch("transitions", TRANSITION_SPACE, space)

    def create_variables(self, input_spaces: dict[str, Space]) -> None:
        """``frames`` ``uint8[frame_capacity, *frame]`` and ``prevs`` ``int64[frame_capacity]``, zeros."""
        frames = input_spaces.get("frames")
        if frames is None:
            raise ValueError(f"FrameReplay {self.global_scope!r}: its frames variable takes its shape from "
                             f"insert's frames; build insert too")
        self.frame_shape = tuple(frames.shape)
        self.frames = self.get_variable("frames", (self.frame_capacity,) + self.frame_shape, "uint8", "zeros",
                                        trainable=False)
        self.prevs = self.get_variable("prevs", (self.frame_capacity,), "int64", "zeros", trainable=False)

    # ---- API ----------------------------------------------------------------------------------
    @api(must_be_complete=False)
    def insert(self, frame_slots: Any, frames: Any, frame_prevs: Any, transitions: Any, dead_slots: Any) -> Any:
        """Applies a `FrameIndex` write plan: frames, transitions (at the largest priority), dead slots.

        Returns the transition slots written (``int64[B]``).
        """
        self._graph_fn_write_frames(frame_slots, frames, frame_prevs)
        slots = self.replay.insert_records(transitions)
        self.replay.sum_tree.update(dead_slots, self._graph_fn_fill(dead_slots, 0.0))
        self.replay.min_tree.update(dead_slots, self._graph_fn_fill(dead_slots, float("inf")))
        return slots

    @api(must_be_complete=False)
    def get_records(self, num_records: Any) -> Any:
        """``(records, slots int64[B], weights float32[B])``: records with ``states``/``next_states`` rebuilt."""
        meta, slots, weights = self.replay.get_records(num_records)
        return self._graph_fn_stacks(meta), slots, weights

    @api(must_be_complete=False)
    def get_records_at(self, indices: Any) -> Any:
        """The transitions in slots ``indices`` (mod capacity) with their stacks rebuilt."""
        return self._graph_fn_stacks(self.replay.memory.get_records_at(indices))

    @api(must_be_complete=False)
    def update_records(self, indices: Any, priorities: Any) -> None:
        """Sets ``p = |priority| + epsilon`` for slots ``indices``; dead transitions stay unsampleable."""
        before = self.replay.sum_tree.get(indices)
        self.replay.update_records(indices, priorities)
        after = self.replay.sum_tree.get(indices)
        self.replay.sum_tree.update(indices, self._graph_fn_keep_dead(before, after, 0.0))
        self.replay.min_tree.update(indices, self._graph_fn_keep_dead(before, after, float("inf")))

    get_size = forward("replay", PrioritizedReplay.get_size,
                       doc="The number of transition slots written (at most ``capacity``; dead ones included), "
                           "``int64[]``.")

    # ---- graph functions --------------------------------------------------------------------------
    @graph_fn(returns=0)
    def _graph_fn_write_frames(self, F: Any, frame_slots: Any, frames: Any, frame_prevs: Any) -> None:
        rows = F.cast(frame_slots, "int64") % self.frame_capacity
        F.scatter_update(self.frames, rows, frames)  # of repeated slots the last write wins
        F.scatter_update(self.prevs, rows, F.cast(frame_prevs, "int64") % self.frame_capacity)

    def _fill_space(self, slots: Space, value: Any = None) -> Space:
        return FloatBox((), batch_rank=True)

    @graph_fn(output_spaces=_fill_space)
    def _graph_fn_fill(self, F: Any, slots: Any, value: float) -> Any:
        return F.ones_like(F.cast(slots, "float32")) * value

    @graph_fn
    def _graph_fn_keep_dead(self, F: Any, before: Any, after: Any, dead_value: float) -> Any:
        return F.where(before > 0.0, after, F.ones_like(after) * dead_value)

    def _stacks_space(self, meta: Space) -> Space:
        stack = parse(f"uint8[{','.join(str(d) for d in self.frame_shape + (self.stack,))}]")
        return Dict(states=stack, actions=IntBox(), rewards=FloatBox(()), terminals=parse("bool[]"),
                    next_states=stack, discounts=FloatBox(())).with_batch_rank()

    def _stack(self, F: Any, newest: Any) -> Any:
        slots = [F.cast(newest, "int64") % self.frame_capacity]
        for _ in range(self.stack - 1):
            slots.append(F.gather(self.prevs, slots[-1]))
        return F.stack([F.gather(self.frames, s) for s in reversed(slots)], axis=-1)

    @graph_fn(output_spaces=_stacks_space)
    def _graph_fn_stacks(self, F: Any, meta: Any) -> Any:
        return {"states": self._stack(F, meta["state"]), "actions": meta["actions"], "rewards": meta["rewards"],
                "terminals": meta["terminals"], "next_states": self._stack(F, meta["target"]),
                "discounts": meta["discounts"]}
