"""The IMPALA component graph: one policy (torso, optional LSTM, logits and value heads), V-trace loss, RMSProp.

Actors and the learner build the same graph; an actor calls the acting methods, the learner the
update method, so the policy variables have one layout everywhere (weights travel by name).
"""

from __future__ import annotations

from typing import Any

from harness.graph import Component, api, graph_fn
from harness.spaces import FloatBox, Space
from reference_agents.components.common import Dense, FoldTimeRank, UnfoldTimeRank
from reference_agents.components.losses import IMPALALoss
from reference_agents.components.nn import LSTM, NeuralNetwork
from reference_agents.components.optimizers import SGD, Adam, RMSProp
from reference_agents.components.policies import CategoricalAdapter
from reference_agents.components.preprocessors import PreprocessorStack

OPTIMIZERS = {"rmsprop": RMSProp, "adam": Adam, "sgd": SGD}


class IMPALAGraph(Component):
    """The root of an IMPALA agent's graph (Espeholt et al. 2018): actor and learner methods over one policy.

    Sub-components: ``preprocessor`` (a stateless `PreprocessorStack`, optional), ``torso`` (a `NeuralNetwork`), ``lstm`` (an `LSTM`, only with ``lstm_units``),
    ``policy`` (a `CategoricalAdapter`: the logits layer and sampling), ``value`` (a one-unit `Dense`),
    ``fold_*``/``unfold_*`` (time-major rollouts folded to one batch rank for the layers and back), ``loss`` (`IMPALALoss`) and ``optimizer`` (over the
    policy's variables).

    API of a feed-forward graph (``states`` ``[B, ...]`` observations):

    - ``act(states)`` -> ``(actions int64[B], logits float32[B,A], values float32[B])``: a sample of the
      policy, the behaviour logits to send with it, and the value estimates;
    - ``act_greedy(states)`` -> actions; ``values(states)`` -> ``float32[B]``;
    - ``update(rollout_states, actions, rewards, discounts, behaviour_logits)`` with time-major rollouts:
      ``rollout_states`` ``[T+1,B,...]`` (the last row is the state after the rollout, for the bootstrap value),
      the rest ``[T,B]`` (``behaviour_logits`` ``[T,B,A]``; ``discounts`` are continuations ``1 -
      terminal`` in [0, 1]) -> ``(total, pg, baseline, entropy, grad_norm)``;
    - ``rollout_logits(rollout_states)`` -> the logits ``[T+1,B,A]`` and values ``[T+1,B]`` the learner
      computes for a rollout (for checks: they equal the actor's behaviour logits under the same weights).

    With an LSTM the acting methods take and return the recurrent state ``(h, c)`` (``float32[B,units]``
    each) and the update takes the rollout's ``initial_state`` and ``resets`` ``bool[T+1,B]`` (true where
    a step starts a new episode: the state restarts from zeros there): ``act_recurrent(states,
    initial_state)`` -> ``(actions, logits, values, (h, c))``, ``act_greedy_recurrent(states,
    initial_state)`` -> ``(actions, (h, c))``, ``values_recurrent(states, initial_state)``,
    ``update_recurrent(rollout_states, actions, rewards, discounts, behaviour_logits, initial_state, resets)``,
    ``rollout_logits_recurrent(rollout_states, initial_state, resets)``.

    Args:
        num_actions: the number of discrete actions A.
        layers: the torso's `NeuralNetwork` layer dicts.
        lstm_units: the LSTM's size, or None for a feed-forward policy.
        loss: `IMPALALoss` arguments.
        optimizer: ``{type: rmsprop|adam|sgd, ...}`` with the optimizer's arguments.
        preprocessing: stateless preprocessor dicts run on observations before the torso (e.g. divide by 255).
        scope: the component's name.
    """

    spec_exempt = "the whole IMPALA graph: specced as an agent under specs/agents (suites/agents)"

    def __init__(self, num_actions: int, layers: list[dict[str, Any]], lstm_units: int | None,
                 loss: dict[str, Any], optimizer: dict[str, Any], preprocessing: list[dict[str, Any]] | None = None,
                 scope: str = "impala") -> None:
        self.num_actions = int(num_actions)
        self.preprocessor = PreprocessorStack(preprocessing, scope="preprocessor") if preprocessing else None
        if self.preprocessor is not None and self.preprocessor.stateful:
            raise ValueError("IMPALAGraph: preprocessing must be stateless (the learner preprocesses the rollouts' "
                             "observations again); stack frames env-side (env.atari: true)")
        self.torso = NeuralNetwork(layers, scope="torso")
        self.lstm = LSTM(int(lstm_units), scope="lstm") if lstm_units else None
        self.policy = CategoricalAdapter(self.num_actions, scope="policy")
        self.value = Dense(1, scope="value")
        # one argument takes one space per component: a fold/unfold pair per kind of value
        self.fold_states, self.fold_features = FoldTimeRank(scope="fold_states"), FoldTimeRank(scope="fold_features")
        self.unfold_features = UnfoldTimeRank(scope="unfold_features")
        self.unfold_logits, self.unfold_values = UnfoldTimeRank(scope="unfold_logits"), \
            UnfoldTimeRank(scope="unfold_values")
        reshapes = [self.fold_states, self.fold_features, self.unfold_features, self.unfold_logits,
                    self.unfold_values]
        self.loss = IMPALALoss(scope="loss", **loss)
        optimizer = dict(optimizer)
        cls = OPTIMIZERS[optimizer.pop("type", "rmsprop")]
        trained = [self.torso, *([self.lstm] if self.lstm else []), self.policy, self.value]
        self.optimizer = cls(variables_of=trained, scope="optimizer", **optimizer)
        pre = [self.preprocessor] if self.preprocessor is not None else []
        super().__init__(*pre, *trained, *reshapes, self.loss, self.optimizer, scope=scope)

    def _torso(self, states: Any) -> Any:
        """The torso's features of observations ``[B, ...]`` (preprocessed first, if configured)."""
        return self.torso.apply(self.preprocessor.preprocess(states) if self.preprocessor is not None else states)

    # ---- acting ---------------------------------------------------------------------------------------
    def _heads(self, features: Any) -> tuple[Any, Any]:
        return self.policy.logits(features), self._graph_fn_squeeze_last(self.value.apply(features))

    def _step_features(self, states: Any, initial_state: Any) -> tuple[Any, Any]:
        """Features of one step ``[B,n]`` through the torso and the LSTM, and the LSTM's new state."""
        outputs, state = self.lstm.apply(self._graph_fn_one_step(self._torso(states)), initial_state)
        return self._graph_fn_squeeze_step(outputs), state

    @api
    def act(self, states: Any) -> Any:
        """Sampled actions, their behaviour logits and the value estimates for a batch of states."""
        logits, values = self._heads(self._torso(states))
        return self.policy.sample_action(logits), logits, values

    @api
    def act_greedy(self, states: Any) -> Any:
        """The most likely actions for a batch of states."""
        return self.policy.greedy_action(self.policy.logits(self._torso(states)))

    @api
    def values(self, states: Any) -> Any:
        """The value estimates ``float32[B]`` of a batch of states."""
        return self._graph_fn_squeeze_last(self.value.apply(self._torso(states)))

    @api
    def act_recurrent(self, states: Any, initial_state: Any) -> Any:
        """As `act`, from the recurrent state ``(h, c)``; also returns the state after the step."""
        features, state = self._step_features(states, initial_state)
        logits, values = self._heads(features)
        return self.policy.sample_action(logits), logits, values, state

    @api
    def act_greedy_recurrent(self, states: Any, initial_state: Any) -> Any:
        """As `act_greedy`, from the recurrent state; also returns the state after the step."""
        features, state = self._step_features(states, initial_state)
        return self.policy.greedy_action(self.policy.logits(features)), state

    @api
    def values_recurrent(self, states: Any, initial_state: Any) -> Any:
        """As `values`, from the recurrent state (which is not advanced)."""
        features, _ = self._step_features(states, initial_state)
        return self._graph_fn_squeeze_last(self.value.apply(features))

    # ---- learning ---------------------------------------------------------------------------------------
    def _learn(self, features: Any, rollout_states: Any, actions: Any, rewards: Any, discounts: Any,
               behaviour_logits: Any) -> Any:
        """The loss and the optimizer step from a rollout's folded features ``[(T+1)*B, n]``."""
        logits, values = self._rollout_heads(features, rollout_states)
        logits, values, bootstrap = self._graph_fn_split_bootstrap(logits, values)
        total, pg, baseline, entropy = self.loss.loss(logits, actions, behaviour_logits, rewards, discounts,
                                                      values, bootstrap)
        total, grad_norm = self.optimizer.step(total)
        return total, pg, baseline, entropy, grad_norm

    def _rollout_heads(self, features: Any, rollout_states: Any) -> tuple[Any, Any]:
        logits, values = self._heads(features)
        return self.unfold_logits.unfold(logits, rollout_states), self.unfold_values.unfold(values, rollout_states)

    def _rollout_features(self, rollout_states: Any, initial_state: Any = None, resets: Any = None) -> Any:
        """Folded features ``[(T+1)*B, n]`` of a rollout (through the LSTM from ``initial_state`` if any)."""
        features = self._torso(self.fold_states.fold(rollout_states))
        if initial_state is None:
            return features
        features = self.unfold_features.unfold(features, rollout_states)
        outputs, _ = self.lstm.apply_with_resets(self._graph_fn_swap_ranks(features), initial_state,
                                                 self._graph_fn_swap_ranks(resets))
        return self.fold_features.fold(self._graph_fn_swap_ranks(outputs))

    @api
    def rollout_logits(self, rollout_states: Any) -> Any:
        """The learner's view of a rollout: logits ``[T+1,B,A]`` and values ``[T+1,B]`` (nothing learns)."""
        return self._rollout_heads(self._rollout_features(rollout_states), rollout_states)

    @api
    def rollout_logits_recurrent(self, rollout_states: Any, initial_state: Any, resets: Any) -> Any:
        """As `rollout_logits`, replaying the LSTM from ``initial_state`` with ``resets``."""
        return self._rollout_heads(self._rollout_features(rollout_states, initial_state, resets), rollout_states)

    @api
    def update(self, rollout_states: Any, actions: Any, rewards: Any, discounts: Any, behaviour_logits: Any) -> Any:
        """One learning step on a batch of time-major rollouts: ``(total, pg, baseline, entropy, grad_norm)``."""
        return self._learn(self._rollout_features(rollout_states), rollout_states, actions, rewards, discounts,
                           behaviour_logits)

    @api
    def update_recurrent(self, rollout_states: Any, actions: Any, rewards: Any, discounts: Any,
                         behaviour_logits: Any, initial_state: Any, resets: Any) -> Any:
        """As `update`, replaying the LSTM from each rollout's ``initial_state`` with its ``resets``."""
        return self._learn(self._rollout_features(rollout_states, initial_state, resets), rollout_states, actions,
                           rewards, discounts, behaviour_logits)

    # ---- graph functions --------------------------------------------------------------------------------
    def _squeezed_space(self, space: Space) -> Space:
        return FloatBox((), dtype=space.dtype, batch_rank=space.has_batch_rank, time_rank=space.has_time_rank,
                        time_major=space.time_major)

    @graph_fn(output_spaces=_squeezed_space)
    def _graph_fn_squeeze_last(self, F: Any, values: Any) -> Any:
        return F.squeeze(values, -1)

    def _one_step_space(self, space: Space) -> Space:
        return space.with_ranks(True, True, time_major=False)

    @graph_fn(output_spaces=_one_step_space)
    def _graph_fn_one_step(self, F: Any, features: Any) -> Any:
        return F.expand_dims(features, 1)

    def _step_space(self, space: Space) -> Space:
        return space.with_ranks(True, False)

    @graph_fn(output_spaces=_step_space)
    def _graph_fn_squeeze_step(self, F: Any, outputs: Any) -> Any:
        return F.squeeze(outputs, 1)

    def _swapped_space(self, space: Space) -> Space:
        return space.with_ranks(True, True, time_major=not space.time_major)

    @graph_fn(output_spaces=_swapped_space)
    def _graph_fn_swap_ranks(self, F: Any, value: Any) -> Any:
        return F.transpose(value, [1, 0] + list(range(2, len(value.shape))))

    def _split_spaces(self, logits: Space, values: Space) -> tuple[Space, Space, Space]:
        return logits, values, values.with_ranks(True, False)

    @graph_fn(returns=3, output_spaces=_split_spaces)
    def _graph_fn_split_bootstrap(self, F: Any, logits: Any, values: Any) -> tuple[Any, Any, Any]:
        return logits[:-1], values[:-1], values[-1]
