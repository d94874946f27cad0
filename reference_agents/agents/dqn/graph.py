"""The DQN component graph: Q-network, target network, exploration, replay, loss, optimizer, synchronizer."""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, IntBox, Space
from reference_agents.components.common import ContainerSplitter, Dense, Synchronizer
from reference_agents.components.explorations import EpsilonGreedy
from reference_agents.components.losses import DQNLoss
from reference_agents.components.memories import FrameReplay, PrioritizedReplay, ReplayMemory
from reference_agents.components.nn import DuelingHead, NeuralNetwork
from reference_agents.components.optimizers import SGD, Adam, RMSProp
from reference_agents.components.preprocessors import PreprocessorStack

#: The fields of one replay record, in the order the loss reads them.
RECORD_KEYS = ("states", "actions", "rewards", "terminals", "next_states", "discounts")
OPTIMIZERS = {"adam": Adam, "sgd": SGD, "rmsprop": RMSProp}


class QNetwork(Component):
    """A Q-network: a `NeuralNetwork` torso and a linear Q-value layer or a `DuelingHead`.

    API: ``q_values(states)`` -> ``float32[B,A]``. Variables: ``network/...`` and
    ``q_values/kernel|bias`` (or ``dueling_head/value|advantage/...``).

    Args:
        layers: the torso's `NeuralNetwork` layer dicts.
        num_actions: the number of actions A.
        dueling: a `DuelingHead` instead of a single linear layer.
        scope: the component's name.
    """

    def __init__(self, layers: list[dict[str, Any]], num_actions: int, dueling: bool = False,
                 scope: str = "q_network") -> None:
        torso = NeuralNetwork(layers, scope="network")
        head = DuelingHead(num_actions, scope="dueling_head") if dueling else Dense(num_actions, scope="q_values")
        super().__init__(torso, head, scope=scope)
        self.torso, self.head, self.num_actions, self.dueling = torso, head, int(num_actions), bool(dueling)

    @api
    def q_values(self, states: Any) -> Any:
        """Q-values ``[B, num_actions]`` for a batch of states."""
        return self.head.apply(self.torso.apply(states))


class DQNGraph(Component):
    """The root of a DQN agent's graph (Mnih et al. 2015, with the double-Q, dueling, n-step and PER options).

    Sub-components: ``preprocessor`` (a stateless `PreprocessorStack`, optional),
    ``q_network`` and its non-trainable copy ``target_q_network`` (`QNetwork`),
    ``exploration`` (`EpsilonGreedy`), ``memory`` (`ReplayMemory`, `PrioritizedReplay`,
    `FrameReplay`, or none when replay is host-side), ``splitter`` (records to fields), ``loss`` (`DQNLoss`),
    ``optimizer`` (over the Q-network) and ``synchronizer`` (online -> target).

    Replay stores the observations as the environment gave them; preprocessing
    runs inside the graph whenever states are used (acting and learning), so a
    uint8 Atari frame stack stays uint8 in memory. Records drawn from replay
    come back without bounds (an empty memory returns zeros); they are given the
    declared ``record_space`` again (`_graph_fn_as_records`), so the networks and
    the loss see one space per argument on every path.

    API (``states`` are observations ``[B, ...]``; ``preprocessed_states`` what the
    preprocessor makes of them; ``records`` a dict of ``RECORD_KEYS`` batches):

    - ``act(states, time_step)`` / ``act_greedy(states)``: epsilon-greedy / greedy actions ``int64[B]``;
      ``act_and_q_values(states, time_step)``: ``act``'s actions and their Q-values ``float32[B,A]``;
    - ``act_preprocessed(preprocessed_states, time_step)``, ``act_greedy_preprocessed(preprocessed_states)``
      and ``preprocess(states)`` (only with a preprocessor);
    - ``q_values(states)``; ``epsilon(time_step)``;
    - ``insert_records(records)`` -> slots; ``memory_size()``; with a `FrameReplay`
      ``insert_frames(frame_slots, frames, frame_prevs, transitions, dead_slots)`` instead;
    - ``update_from_memory(batch_size)`` -> ``(loss, grad_norm, td_errors)``: samples, learns and (PER) writes
      the new priorities ``|td_error|`` back;
    - ``update_from_batch(records, importance_weights)`` -> ``(loss, grad_norm, td_errors)``;
    - ``td_errors(records)`` -> ``float32[B]`` without learning (worker-side priorities);
    - ``sync_target()``.
    """

    spec_exempt = "the whole DQN graph: specced as an agent under specs/agents (suites/agents)"

    def __init__(self, num_actions: int, layers: list[dict[str, Any]], dueling: bool,
                 memory: dict[str, Any] | None, loss: dict[str, Any], optimizer: dict[str, Any],
                 exploration: dict[str, Any], target_tau: float = 1.0,
                 preprocessing: list[dict[str, Any]] | None = None, record_space: Space | None = None,
                 scope: str = "dqn") -> None:
        self.num_actions = int(num_actions)
        self.record_space = record_space
        self.preprocessor = PreprocessorStack(preprocessing, scope="preprocessor") if preprocessing else None
        if self.preprocessor is not None and self.preprocessor.stateful:
            raise ValueError("DQNGraph: preprocessing must be stateless (replay stores observations and "
                             "preprocesses them again when learning); stack frames env-side (env.atari: true)")
        self.q_network = QNetwork(layers, self.num_actions, dueling, scope="q_network")
        self.target_q_network = self.q_network.copy(scope="target_q_network", trainable=False)
        self.exploration = EpsilonGreedy(self.num_actions, exploration, scope="exploration")
        memory = dict(memory) if memory is not None else None
        kind = memory.pop("type", "replay") if memory is not None else None
        self.prioritized = kind in ("prioritized", "frames")  # FrameReplay samples like PrioritizedReplay
        if kind == "frames":
            self.memory = FrameReplay(scope="memory", **memory)
        elif kind == "prioritized":
            self.memory = PrioritizedReplay(scope="memory", **memory)
        elif kind is not None:
            self.memory = ReplayMemory(memory["capacity"], scope="memory")
        else:
            self.memory = None  # replay held outside the graph (HostFrameReplay): learn with update_from_batch
        self.splitter = ContainerSplitter(keys=list(RECORD_KEYS), scope="splitter")
        self.loss = DQNLoss(importance_weights=True, scope="loss", **loss)
        optimizer = dict(optimizer)
        cls = OPTIMIZERS[optimizer.pop("type", "adam")]
        self.optimizer = cls(variables_of=self.q_network, scope="optimizer", **optimizer)
        self.synchronizer = Synchronizer(self.q_network, self.target_q_network, tau=target_tau, scope="synchronizer")
        parts = [self.q_network, self.target_q_network, self.exploration, *([self.memory] if self.memory else []),
                 self.splitter, self.loss, self.optimizer, self.synchronizer]
        super().__init__(*([self.preprocessor] if self.preprocessor else []), *parts, scope=scope)

    # ---- acting -----------------------------------------------------------------------
    def _pre(self, states: Any) -> Any:
        return self.preprocessor.preprocess(states) if self.preprocessor is not None else states

    @api
    def preprocess(self, states: Any) -> Any:
        """The preprocessor's output for ``states`` (only built with a preprocessor)."""
        return self.preprocessor.preprocess(states)

    @api
    def q_values(self, states: Any) -> Any:
        """The online network's Q-values for (raw) ``states``."""
        return self.q_network.q_values(self._pre(states))

    @api
    def act(self, states: Any, time_step: Any) -> Any:
        """Epsilon-greedy actions for observations, epsilon by the schedule at ``time_step``."""
        return self.exploration.explore(self._graph_fn_argmax(self.q_network.q_values(self._pre(states))), time_step)

    @api
    def act_and_q_values(self, states: Any, time_step: Any) -> Any:
        """``act``'s actions and the Q-values ``[B, A]`` they were chosen from, of one forward pass (Ape-X
        workers score their transitions' priorities with these act-time values)."""
        q_values = self.q_network.q_values(self._pre(states))
        return self.exploration.explore(self._graph_fn_argmax(q_values), time_step), q_values

    @api
    def act_greedy(self, states: Any) -> Any:
        """Greedy actions ``argmax_a Q(s, a)`` for observations."""
        return self._graph_fn_argmax(self.q_network.q_values(self._pre(states)))

    @api
    def act_preprocessed(self, preprocessed_states: Any, time_step: Any) -> Any:
        """Epsilon-greedy actions for states that are preprocessed already."""
        return self.exploration.explore(self._graph_fn_argmax(self.q_network.q_values(preprocessed_states)),
                                        time_step)

    @api
    def act_greedy_preprocessed(self, preprocessed_states: Any) -> Any:
        """Greedy actions for states that are preprocessed already."""
        return self._graph_fn_argmax(self.q_network.q_values(preprocessed_states))

    @api
    def epsilon(self, time_step: Any) -> Any:
        """The exploration schedule's epsilon at ``time_step``."""
        return self.exploration.epsilon(time_step)

    # ---- memory -----------------------------------------------------------------------
    @api
    def insert_records(self, records: Any) -> Any:
        """Writes a batch of records into replay; returns the slots written."""
        return self.memory.insert_records(records)

    @api(must_be_complete=False)
    def insert_frames(self, frame_slots: Any, frames: Any, frame_prevs: Any, transitions: Any,
                      dead_slots: Any) -> Any:
        """Applies a `FrameIndex` write plan to a `FrameReplay`; returns the transition slots written."""
        return self.memory.insert(frame_slots, frames, frame_prevs, transitions, dead_slots)

    @api
    def memory_size(self) -> Any:
        """The number of records in replay, ``int64[]``."""
        return self.memory.get_size()

    # ---- learning ---------------------------------------------------------------------
    def _loss(self, records: Any, importance_weights: Any) -> tuple[Any, Any]:
        states, actions, rewards, terminals, next_states, discounts = self.splitter.split(records)
        states, next_states = self._pre(states), self._pre(next_states)
        q_values = self.q_network.q_values(states)
        next_target = self.target_q_network.q_values(next_states)
        next_online = self.q_network.q_values(next_states) if self.loss.double_q else None
        return self.loss.loss(q_values, actions, rewards, terminals, next_target, next_online,
                              importance_weights, discounts)

    def _sample(self, batch_size: Any) -> tuple[Any, Any, Any]:
        """``(records, importance_weights, slots)`` of ``batch_size`` draws from replay (unit weights and no slots
        from uniform replay)."""
        if self.prioritized:
            records, slots, weights = self.memory.get_records(batch_size)
            return self._graph_fn_as_records(records), self._graph_fn_as_weights(weights), slots
        records = self._graph_fn_as_records(self.memory.get_records(batch_size))
        return records, self._graph_fn_unit_weights(records), None

    @api(must_be_complete=False)
    def update_from_memory(self, batch_size: Any) -> Any:
        """One learning step on ``batch_size`` records drawn from replay: ``(loss, grad_norm, td_errors)``."""
        records, weights, slots = self._sample(batch_size)
        loss, td_errors = self._loss(records, weights)
        loss, grad_norm = self.optimizer.step(loss)
        if self.prioritized:
            self.memory.update_records(slots, td_errors)
        return loss, grad_norm, td_errors

    @api(must_be_complete=False)
    def sample_from_memory(self, batch_size: Any) -> Any:
        """``batch_size`` records drawn from replay for a step outside the graph's own ``update_from_memory`` (a
        replicated ``update_from_batch``): ``(records, importance_weights, slots)`` from prioritized replay,
        ``(records, importance_weights)`` (unit weights) from uniform replay."""
        records, weights, slots = self._sample(batch_size)
        return (records, weights, slots) if self.prioritized else (records, weights)

    @api(must_be_complete=False)
    def update_priorities(self, slots: Any, td_errors: Any) -> None:
        """Sets the priorities of the replay slots ``slots`` from ``td_errors`` (after `sample_from_memory`)."""
        self.memory.update_records(slots, td_errors)

    @api
    def update_from_batch(self, records: Any, importance_weights: Any) -> Any:
        """One learning step on an external batch of records: ``(loss, grad_norm, td_errors)``."""
        loss, td_errors = self._loss(records, importance_weights)
        loss, grad_norm = self.optimizer.step(loss)
        return loss, grad_norm, td_errors

    @api
    def td_errors(self, records: Any) -> Any:
        """The TD errors of a batch of records under the current networks (nothing learns)."""
        _, td_errors = self._loss(records, self._graph_fn_unit_weights(records))
        return td_errors

    @api
    def sync_target(self) -> None:
        """Copies (or, ``tau < 1``, blends) the online network into the target network."""
        return self.synchronizer.sync()

    # ---- graph functions --------------------------------------------------------------------
    def _argmax_space(self, q_space: Space) -> Space:
        return IntBox(self.num_actions, batch_rank=True)

    @graph_fn(output_spaces=_argmax_space)
    def _graph_fn_argmax(self, F: Any, q_values: Any) -> Any:
        return F.argmax(q_values, axis=-1)

    def _as_records_space(self, records: Space) -> Space:
        if self.record_space is None:
            raise ValueError("DQNGraph: record_space must be given to learn from replay")
        return self.record_space

    @graph_fn(output_spaces=_as_records_space)
    def _graph_fn_as_records(self, F: Any, records: Any) -> Any:
        return records

    def _weights_space(self, values: Space) -> Space:
        return FloatBox((), batch_rank=True)

    @graph_fn(output_spaces=_weights_space)
    def _graph_fn_as_weights(self, F: Any, weights: Any) -> Any:
        return weights

    @graph_fn(output_spaces=_weights_space)
    def _graph_fn_unit_weights(self, F: Any, records: Any) -> Any:
        return F.ones_like(records["rewards"])
