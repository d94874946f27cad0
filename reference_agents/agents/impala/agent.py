"""`IMPALAAgent`: the actor and learner roles of IMPALA over one built `IMPALAGraph`, on TF or PyTorch."""

from __future__ import annotations

import collections
import os
from typing import Any

import numpy as np

from harness.execution.executor import GraphExecutor
from harness.execution.serialization import BadFileError, read_npz
from harness.execution.strategies import make_strategy
from harness.graph.errors import SpacegraphError
from harness.spaces import Space
from reference_agents.agents.checkpoints import META_MEMBER, export_agent_model
from reference_agents.agents.config import ConfigError, discrete_env_spaces
from reference_agents.agents.impala.checkpoints import CHECKPOINT_FORMAT, MODEL_FORMAT, IMPALACheckpointMixin
from reference_agents.agents.impala.config import IMPALAConfig, load_impala_config
from reference_agents.agents.impala.graph import IMPALAGraph
from reference_agents.agents.impala.rollouts import RolloutBuilder, concat_rollouts
from reference_agents.components.nn.network import preset_layers


class IMPALAAgent(IMPALACheckpointMixin):
    """An IMPALA agent (Espeholt et al. 2018): a V-trace actor-critic with a feed-forward or LSTM policy.

    One config and one graph serve both roles. As an **actor** the agent samples actions
    (`get_actions`) and, through `observe`, cuts the lockstep steps of its ``N`` environments into
    time-major rollouts of ``rollout.length`` steps with the behaviour logits; finished rollouts wait
    in `outbox` (an executor ships them to a learner). As a **learner** `update` takes a batch of
    rollouts (``rollout.batch_size`` of them, concatenated along the batch) and runs one V-trace
    step. Run in one process, `update_on_schedule` joins both: each rollout batch the actor finishes
    is learned from at once (the worker-facing interface of `DQNAgent`, so `VectorEnvWorker` and
    `Trainer` drive it as they drive DQN).

    A recurrent policy keeps ``(h, c)`` per environment slot across rollouts and restarts it at
    episode ends (`observe` and `reset_preprocessor`); rollouts carry their initial state and episode
    starts so the learner replays the LSTM exactly as the actor ran it.

    Episodes cut by a time limit (``truncated``) bootstrap: the reward of the last step gets
    ``gamma * V(final observation)`` added and the discount is 0, since the next row of the rollout
    already belongs to the next episode.

    Args:
        config: a config file (YAML/JSON), dict or `IMPALAConfig`.
        backend: overrides the config's ``backend``.
        seed: overrides the config's ``seed``.
        state_space: the observation space without batch rank (default: the config env's).
        action_space: an ``IntBox(n)`` (default: the config env's).
        device: where the graph's variables and ops live (``"cuda:0"``, ``"/gpu:0"``; default: the backend's
            default, the CPU here); an executor places a learner on an accelerator this way.

    Raises:
        ConfigError: naming the config file and key path for a bad config.
    """

    config_class = IMPALAConfig
    checkpoint_format = CHECKPOINT_FORMAT

    def __init__(self, config: Any, backend: str | None = None, seed: int | None = None,
                 state_space: Space | str | None = None, action_space: Space | str | None = None,
                 device: str | None = None) -> None:
        self.config, self.config_source = load_impala_config(config, {"backend": backend, "seed": seed})
        cfg: IMPALAConfig = self.config
        self.state_space, self.action_space, self.num_actions = discrete_env_spaces(
            "IMPALA", cfg, self.config_source, state_space, action_space)
        self.backend, self.seed = cfg.backend, cfg.seed
        self.gamma = float(cfg.loss.gamma)
        self.units = cfg.network.lstm_units
        self.recurrent = self.units is not None
        self.device = device
        self.graph = self._make_graph()
        self.executor = self._build()
        self.timesteps = 0
        self.updates = 0
        self.rollouts_made = 0
        self.rollouts_learned = 0
        self.outbox: collections.deque[dict[str, Any]] = collections.deque()
        self.last_metrics: dict[str, float] = {}
        self._builder = RolloutBuilder(cfg.rollout.length, self.recurrent)
        self._state = (np.zeros((0, self.units or 0), np.float32),) * 2
        self._starts = np.zeros(0, bool)
        self._last: dict[str, Any] | None = None

    # ---- construction ---------------------------------------------------------------------------------
    def _make_graph(self) -> IMPALAGraph:
        cfg = self.config
        layers = preset_layers(cfg.network.layers)
        try:
            return IMPALAGraph(self.num_actions, layers, self.units, cfg.loss.model_dump(),
                               cfg.optimizer.model_dump(), cfg.preprocessing or None)
        except (ValueError, TypeError) as exc:
            text = str(exc)
            key = next((k for k, words in (("network", ("NeuralNetwork", "Dense", "Conv2D", "LSTM")),
                                           ("loss", ("IMPALALoss", "VTrace")),
                                           ("optimizer", ("RMSProp", "Adam", "SGD", "learning_rate")),
                                           ("preprocessing", ("Preprocessor", "preprocess")))
                        if any(w in text for w in words)), "")
            raise ConfigError(self.config_source, [(key, text)]) from None

    def _methods(self) -> list[str]:
        names = ["act", "act_greedy", "values", "update", "rollout_logits"]
        return [n + "_recurrent" for n in names] if self.recurrent else names

    def _build(self) -> GraphExecutor:
        states = self.state_space.with_batch_rank()
        a = self.num_actions
        spaces = {"states": states, "rollout_states": self.state_space.with_ranks(True, True, time_major=True),
                  "actions": f"int64[T,B](0,{a - 1})", "rewards": "float32[T,B]", "discounts": "float32[T,B](0,1)",
                  "behaviour_logits": f"float32[T,B,{a}]"}
        if self.recurrent:
            spaces.update(initial_state=f"[B](float32[{self.units}], float32[{self.units}])", resets="bool[T,B]")
        try:
            return GraphExecutor(self.graph, spaces, backend=self.backend, seed=self.seed,
                                 api_methods=self._methods(), compile="first_call",
                                 device_map={self.graph.global_scope: self.device} if self.device else None,
                                 strategy=make_strategy(self.config.execution.model_dump(),
                                                        ["update_recurrent" if self.recurrent else "update"],
                                                        reduction=self.config.loss.reduction),
                                 replay=self.config.execution.replay)
        except SpacegraphError as exc:
            raise ConfigError(self.config_source, [("", f"the IMPALA graph does not build: {exc}")]) from None

    # ---- acting -----------------------------------------------------------------------------------------
    def _batch(self, states: Any, what: str) -> tuple[np.ndarray, bool]:
        arr = np.asarray(states)
        core = self.state_space.shape
        if arr.shape == core:
            return arr[None], True
        if arr.ndim == len(core) + 1 and arr.shape[1:] == core:
            return arr, False
        raise ValueError(f"IMPALAAgent.{what}: states must have shape {core} (one state) or [N, *{core}]; "
                         f"got {arr.shape}")

    def _slots(self, n: int) -> None:
        """Grows the per-environment recurrent state and episode-start flags to ``n`` slots."""
        have = self._starts.shape[0]
        if n > have:
            grow = np.zeros((n - have, self.units or 0), np.float32)
            self._state = tuple(np.concatenate([s, grow]) for s in self._state)
            self._starts = np.concatenate([self._starts, np.ones(n - have, bool)])

    def get_actions(self, states: Any, explore: bool = True) -> Any:
        """Actions for the states of environment slots ``0..N-1`` (or one state): sampled from the policy
        (``explore``) or its most likely ones. Recurrent policies advance those slots' state."""
        batch, single = self._batch(states, "get_actions")
        n = batch.shape[0]
        self._slots(n)
        before = tuple(s[:n].copy() for s in self._state)
        ex = self.executor.execute
        if self.recurrent:
            if explore:
                actions, logits, _, after = ex("act_recurrent", batch, before)
            else:
                actions, after = ex("act_greedy_recurrent", batch, before)
                logits = None
            for i in range(2):
                self._state[i][:n] = np.asarray(after[i])
        elif explore:
            actions, logits, _ = ex("act", batch)
        else:
            actions, logits = ex("act_greedy", batch), None
        actions = np.asarray(actions)
        self._last = {"states": batch, "actions": actions, "logits": None if logits is None else np.asarray(logits),
                      "before": before, "after": tuple(s[:n].copy() for s in self._state)}
        return actions[0] if single else actions

    def epsilon(self) -> None:
        """None: IMPALA samples its actions from the policy (no epsilon-greedy exploration)."""
        return None

    def values(self, states: Any) -> np.ndarray:
        """The value estimates ``[N]`` of states (recurrent: from the slots' current state, not advanced)."""
        batch, _ = self._batch(states, "values")
        if not self.recurrent:
            return np.asarray(self.executor.execute("values", batch))
        n = batch.shape[0]
        self._slots(n)
        return np.asarray(self.executor.execute("values_recurrent", batch, tuple(s[:n] for s in self._state)))

    def reset_preprocessor(self, env_ids: Any) -> None:
        """Restarts the recurrent state of these environment slots (a new episode begins there)."""
        ids = np.asarray(list(env_ids), np.int64).reshape(-1)
        if ids.size:
            self._slots(int(ids.max()) + 1)
            for s in self._state:
                s[ids] = 0.0
            self._starts[ids] = True

    # ---- observing: rollouts ----------------------------------------------------------------------------
    def observe(self, states: Any, actions: Any, rewards: Any, terminals: Any, next_states: Any,
                env_id: Any = None, truncated: Any = None) -> None:
        """Takes one lockstep step of environment slots ``0..N-1`` acted on by the last `get_actions`.

        Every ``rollout.length`` steps a finished rollout goes to `outbox`.

        Raises:
            ValueError: when the step is not the one `get_actions` last sampled (behaviour logits unknown),
                or an argument's length does not fit.
        """
        batch, _ = self._batch(states, "observe")
        n = batch.shape[0]
        last = self._last
        if (last is None or last["logits"] is None or last["states"].shape != batch.shape
                or not np.array_equal(last["actions"], np.asarray(actions).reshape(-1))):
            raise ValueError("IMPALAAgent.observe: the step must be the one the last get_actions(explore=True) "
                             "sampled (its behaviour logits go into the rollout)")
        if env_id is not None and not np.array_equal(np.asarray(env_id).reshape(-1), np.arange(n)):
            raise ValueError(f"IMPALAAgent.observe: env_id must be 0..{n - 1} in order (lockstep rollouts); "
                             f"got {env_id}")

        def column(value: Any, name: str, dtype: Any) -> np.ndarray:
            arr = np.asarray(value, dtype=dtype).reshape(-1) if value is not None else np.zeros(n, dtype)
            if arr.shape != (n,):
                raise ValueError(f"IMPALAAgent.observe: {name} must have one entry per state ({n}); got shape "
                                 f"{np.shape(value)}")
            return arr

        rewards_ = column(rewards, "rewards", np.float32).copy()
        terminals_, truncated_ = column(terminals, "terminals", bool), column(truncated, "truncated", bool)
        nxt, _ = self._batch(next_states, "observe (next_states)")
        cut = truncated_ & ~terminals_
        if cut.any():  # bootstrap a time-limit cut inside the reward (the next row is another episode)
            if self.recurrent:
                boot = self.executor.execute("values_recurrent", nxt, last["after"])
            else:
                boot = self.executor.execute("values", nxt)
            rewards_[cut] += self.gamma * np.asarray(boot, np.float32)[cut]
        done = terminals_ | truncated_
        starts = self._starts[:n].copy()
        rollout = self._builder.add(batch, last["actions"], rewards_, (~done).astype(np.float32), last["logits"],
                                    nxt, starts, last["before"])
        self._starts[:n] = False
        if done.any():
            self.reset_preprocessor(np.flatnonzero(done))
        self.timesteps += n
        self._last = None
        if rollout is not None:
            self.rollouts_made += 1
            self.outbox.append(rollout)

    # ---- learning -----------------------------------------------------------------------------------------
    def update(self, rollouts: list[dict[str, Any]] | dict[str, Any] | None = None) -> dict[str, Any]:
        """``rollout.epochs`` V-trace learning steps on rollouts (default: the next ``rollout.batch_size`` of
        `outbox`), one after another on the same batch; each step's V-trace weighs the rollouts' behaviour
        logits against the policy as that step finds it.

        Returns:
            ``{"loss", "pg", "baseline", "entropy", "grad_norm", "policy_entropy", "rollouts"}`` of the first
            step (the loss on the batch as it arrived; floats), with rollouts counted. ``entropy`` is the loss
            term (the negative entropy, reduced as ``loss.reduction`` says); ``policy_entropy`` the mean entropy
            of the policy over the batch's steps, in nats (ln of the action count for a uniform policy).
        """
        if rollouts is None:
            k = self.config.rollout.batch_size
            if len(self.outbox) < k:
                raise ValueError(f"IMPALAAgent.update: {len(self.outbox)} rollouts wait, {k} make a batch")
            rollouts = [self.outbox.popleft() for _ in range(k)]
        batch = concat_rollouts(rollouts if isinstance(rollouts, list) else [rollouts])
        args = [batch["rollout_states"], batch["actions"], batch["rewards"], batch["discounts"],
                batch["behaviour_logits"]]
        if self.recurrent:
            if "initial_state" not in batch:
                raise ValueError("IMPALAAgent.update: a recurrent policy needs rollouts with initial_state and "
                                 "resets")
            args += [batch["initial_state"], batch["resets"]]
        method = "update_recurrent" if self.recurrent else "update"
        out = self.executor.execute(method, *args)
        self.last_metrics = {k: float(v) for k, v in zip(("loss", "pg", "baseline", "entropy", "grad_norm"), out)}
        steps = batch["actions"].size if self.config.loss.reduction == "sum" else 1   # [T, N] of the batch
        self.last_metrics["policy_entropy"] = -self.last_metrics["entropy"] / steps
        for _ in range(self.config.rollout.epochs - 1):
            self.executor.execute(method, *args)
        self.updates += self.config.rollout.epochs
        self.rollouts_learned += len(rollouts) if isinstance(rollouts, list) else 1
        return dict(self.last_metrics, rollouts=self.rollouts_learned)

    def rollout_logits(self, rollout: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """The logits ``[T+1,N,A]`` and values ``[T+1,N]`` the learner computes for a rollout (nothing learns);
        under the actor's weights the first ``T`` rows of logits are its behaviour logits."""
        args = [rollout["rollout_states"]]
        if self.recurrent:
            args += [rollout["initial_state"], rollout["resets"]]
        logits, values = self.executor.execute("rollout_logits_recurrent" if self.recurrent else "rollout_logits",
                                               *args)
        return np.asarray(logits), np.asarray(values)

    def update_on_schedule(self) -> list[dict[str, Any]]:
        """Learns from every full batch of rollouts waiting in `outbox` (the one-process mode)."""
        out = []
        while len(self.outbox) >= self.config.rollout.batch_size:
            out.append(self.update())
        return out

    # ---- weights and models ---------------------------------------------------------------------------------
    def _policy_prefixes(self) -> tuple[str, ...]:
        parts = [self.graph.torso, *([self.graph.lstm] if self.recurrent else []), self.graph.policy,
                 self.graph.value]
        return tuple(p.global_scope + "/" for p in parts)

    def get_weights(self, everything: bool = False) -> dict[str, np.ndarray]:
        """The policy's weights keyed by scope path (``impala/torso/dense_0/kernel``), or every variable
        (optimizer slots too)."""
        weights = self.executor.get_weights()
        if everything:
            return weights
        prefixes = self._policy_prefixes()
        return {k: v for k, v in weights.items() if k.startswith(prefixes)}

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Loads policy weights from `get_weights` (either backend; strict: keys must match exactly)."""
        own = set(self.get_weights())
        missing, extra = sorted(own - set(weights)), sorted(set(weights) - own)
        if missing or extra:
            raise ValueError(f"IMPALAAgent.set_weights: keys differ from the policy's: missing {missing}, "
                             f"unexpected {extra}")
        self.executor.set_weights(dict(weights), strict=False)  # the keys are checked above: slots keep theirs

    def export_model(self, path: str | os.PathLike) -> str:
        """Writes the policy's weights and the config to ``path`` (``.npz``, atomically); returns the path."""
        return export_agent_model(self, path, MODEL_FORMAT)

    def import_model(self, path: str | os.PathLike) -> None:
        """Loads a file `export_model` wrote (either backend).

        Raises:
            BadFileError: (a ValueError) naming the file and what does not fit; the agent is unchanged then.
        """
        path = os.fspath(path)
        try:
            _, arrays = read_npz(path, "an IMPALA model file", meta_key=META_MEMBER, formats=MODEL_FORMAT)
        except BadFileError as exc:
            raise exc.within("IMPALAAgent.import_model") from None
        try:
            self.set_weights({k[2:]: v for k, v in arrays.items() if k.startswith("w:")})
        except ValueError as exc:
            raise BadFileError(path, f"does not fit this agent: {exc}", "IMPALAAgent.import_model") from None
