"""`DQNAgent`: the agent API of the RLgraph paper (Listing 2) over a built `DQNGraph`, on TF or PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.execution.executor import GraphExecutor
from harness.execution.strategies import make_strategy
from harness.graph.errors import SpacegraphError
from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Space
from reference_agents.agents.checkpoints import CHECKPOINT_REPLAY, CHECKPOINT_STATE, CHECKPOINT_WEIGHTS
from reference_agents.agents.config import ConfigError, discrete_env_spaces, load_agent_config
from reference_agents.agents.dqn.checkpoints import CHECKPOINT_FORMAT, CheckpointMixin
from reference_agents.agents.dqn.config import DQNConfig
from reference_agents.agents.dqn.graph import RECORD_KEYS, DQNGraph
from reference_agents.agents.dqn.replay_stores import GraphFrameReplay, GraphReplay, HostReplay
from reference_agents.agents.dqn.staging import StagingMixin
from reference_agents.components.helpers import NStepAccumulator
from reference_agents.components.memories import HostFrameReplay
from reference_agents.components.memories.frame_replay import TRANSITION_SPACE
from reference_agents.components.nn.network import preset_layers

__all__ = ["CHECKPOINT_REPLAY", "CHECKPOINT_STATE", "CHECKPOINT_WEIGHTS", "DQNAgent"]


class DQNAgent(StagingMixin, CheckpointMixin):
    """A DQN agent (double Q, dueling, n-step and prioritized replay as options) built from a config.

    The agent owns a `GraphExecutor` over a `DQNGraph` on the backend the
    config's ``backend`` key names, plus the Python-side bookkeeping around it:
    the env-step counter that drives the epsilon schedule and the update
    schedule, per-environment n-step folding (`NStepAccumulator`) and a staging
    list of finished transitions that is written into replay in one call before
    each update.

    Typical use (a `VectorEnvWorker` does this loop)::

        agent = DQNAgent("reference_agents/configs/dqn_cartpole.yaml", backend="torch")
        actions = agent.get_actions(obs)                  # [N] for N environments
        next_obs, rewards, terminated, truncated, _ = step(actions)
        agent.observe(obs, actions, rewards, terminated, next_obs, truncated=truncated)
        agent.update_on_schedule()

    Args:
        config: a config file (YAML/JSON), dict or `DQNConfig` (see `reference_agents.agents.dqn.config`).
        backend: overrides the config's ``backend`` (``"tf"`` or ``"torch"``).
        seed: overrides the config's ``seed`` (initial weights, exploration and replay sampling).
        state_space: the observation space without batch rank (default: the config env's).
        action_space: an ``IntBox(n)`` (default: the config env's).

    Raises:
        ConfigError: naming the config file and key path for a bad config (component arguments included).
    """

    config_class = DQNConfig
    checkpoint_format = CHECKPOINT_FORMAT

    def __init__(self, config: Any, backend: str | None = None, seed: int | None = None,
                 state_space: Space | str | None = None, action_space: Space | str | None = None) -> None:
        self.config, self.config_source = load_agent_config(config, {"backend": backend, "seed": seed},
                                                              model=DQNConfig)
        cfg = self.config
        self.state_space, self.action_space, self.num_actions = discrete_env_spaces(
            "DQN", cfg, self.config_source, state_space, action_space)
        self._state_shape = tuple(self.state_space.shape)  # checked on every get_actions (a property call saved)
        self.backend = cfg.backend
        self.seed = cfg.seed
        self.gamma, self.n_step = float(cfg.loss.gamma), int(cfg.loss.n_step)
        self.strategy = self._strategy()
        self.replay = self._make_replay()
        self.graph = self._make_graph()
        self.executor = self._build()
        self.timesteps = 0          # env steps observed (summed over environments)
        self.updates = 0            # learning steps taken
        self._updates_due_at = cfg.update.start_after
        self._accumulators: dict[int, NStepAccumulator] = {}
        self._staged: list[dict[str, Any]] = []
        # staged transitions go into replay at each update, and at the latest when this many wait
        # (an agent that only observes, e.g. while sampling, does not pile them up in Python)
        self.flush_every = max(256, cfg.update.batch_size)
        self.last_metrics: dict[str, float] = {}

    # ---- construction -----------------------------------------------------------------------
    def _component_error(self, key: str, exc: Exception) -> ConfigError:
        return ConfigError(self.config_source, [(key, str(exc))])

    def _make_replay(self) -> Any:
        """The replay: records in the graph, frames in the graph (`FrameReplay`) or host-side."""
        mem = self.config.memory
        # a replicated update_from_batch learns from replay in the graph by draws (sample_from_memory) it shards
        sampled = self.strategy.name != "local"
        if mem.type != "frames":
            return GraphReplay(sampled, prioritized=mem.type == "prioritized")
        shape = self.state_space.shape
        if self.state_space.dtype != np.uint8 or len(shape) < 2:
            raise ConfigError(self.config_source, [("memory.type", f"frames needs uint8 frame stacks "
                                                                   f"[..., stack] as states; the env gives "
                                                                   f"{self.state_space!r}")])
        if mem.form == "graph" and mem.compression is not None:
            raise ConfigError(self.config_source, [("memory.compression", f"compression "
                                                    f"{mem.compression!r} is only for memory.form: host (the "
                                                    f"in-graph FrameReplay keeps frames uncompressed)")])
        try:
            if mem.form == "graph":
                return GraphFrameReplay(mem.capacity, shape[:-1], shape[-1], mem.frame_capacity, mem.match_window,
                                        sampled)
            return HostReplay.for_backend(HostFrameReplay(mem.capacity, shape[:-1], shape[-1], mem.prioritized,
                                                          mem.alpha, mem.beta, mem.epsilon, mem.compression,
                                                          mem.frame_capacity, mem.match_window, seed=self.seed),
                                          self.backend)
        except ValueError as exc:
            text = str(exc)
            key = next((f"memory.{k}" for k in ("frame_capacity", "capacity", "stack", "alpha", "beta", "epsilon",
                                                "match_window") if f"{k} " in text), "memory")
            raise ConfigError(self.config_source, [(key, text)]) from None

    def _make_graph(self) -> DQNGraph:
        cfg = self.config
        layers = preset_layers(cfg.network.layers)
        memory = cfg.memory.model_dump()
        if memory["type"] == "replay":
            memory = {"type": "replay", "capacity": memory["capacity"]}
        elif memory["type"] == "frames":
            memory = None if memory["form"] == "host" else {
                "type": "frames", "capacity": memory["capacity"], "stack": self.state_space.shape[-1],
                "frame_capacity": memory["frame_capacity"], "prioritized": memory["prioritized"],
                "alpha": memory["alpha"], "beta": memory["beta"], "epsilon": memory["epsilon"]}
        else:
            memory = {k: memory[k] for k in ("type", "capacity", "alpha", "beta", "epsilon")}
        optimizer = cfg.optimizer.model_dump()
        loss = cfg.loss.model_dump()
        try:
            return DQNGraph(self.num_actions, layers, cfg.network.dueling, memory, loss, optimizer,
                            cfg.exploration, cfg.target_sync.tau, cfg.preprocessing or None, self.record_space())
        except (ValueError, TypeError) as exc:
            text = str(exc)
            key = next((k for k, words in (("network", ("NeuralNetwork", "Dense", "Conv2D", "DuelingHead")),
                                           ("memory", ("Replay", "capacity")), ("loss", ("DQNLoss",)),
                                           ("optimizer", ("Adam", "SGD", "RMSProp", "learning_rate")),
                                           ("exploration", ("EpsilonGreedy",)),
                                           ("preprocessing", ("Preprocessor", "preprocess")),
                                           ("target_sync", ("Synchronizer",)))
                        if any(w in text for w in words)), "")
            raise self._component_error(key, exc) from None

    def _preprocessed_space(self) -> Space:
        if self.graph.preprocessor is None:
            return self.state_space.with_batch_rank()
        from reference_agents.components.preprocessors import PreprocessorStack

        # only the output space is needed: it comes from the build's sample runs, nothing is compiled
        probe = GraphExecutor(PreprocessorStack(self.config.preprocessing, scope="probe"),
                              {"inputs": self.state_space.with_batch_rank()}, backend=self.backend, seed=self.seed,
                              compile="first_call")
        return probe.apis["preprocess"].output_space

    def record_space(self) -> Dict:
        """The space of one batch of replay records (observations as the environment gives them)."""
        return Dict(states=self.state_space, actions=IntBox(self.num_actions), rewards=FloatBox(()),
                    terminals=BoolBox(), next_states=self.state_space,
                    discounts=FloatBox((), 0.0, 1.0)).with_batch_rank()

    def _build(self) -> GraphExecutor:
        states = self.state_space.with_batch_rank()
        spaces = {"states": states, "time_step": "int64[]", "records": self.record_space(),
                  "importance_weights": "float32[B]"}
        if {"update_from_memory", "sample_from_memory"} & set(self.replay.methods):
            spaces["batch_size"] = "int64[]"
        if "update_priorities" in self.replay.methods:
            spaces.update(slots="int64[B]", td_errors="float32[B]")
        if isinstance(self.replay, GraphFrameReplay):
            frame = ",".join(str(d) for d in self.state_space.shape[:-1])
            spaces.update(frame_slots="int64[B]", frames=f"uint8[B,{frame}]", frame_prevs="int64[B]",
                          transitions=TRANSITION_SPACE, dead_slots="int64[B]")
        methods = ["q_values", "act", "act_and_q_values", "act_greedy", "act_preprocessed", "act_greedy_preprocessed", "epsilon",
                   *self.replay.methods, "update_from_batch", "td_errors", "sync_target"]
        if self.graph.preprocessor is not None:
            methods.append("preprocess")
        spaces["preprocessed_states"] = self._preprocessed_space()
        unknown = [m for m in self.config.execution.trace if m not in methods]
        if unknown:
            raise ConfigError(self.config_source, [("execution.trace", f"no API method(s) {unknown}; the agent's "
                                                    f"methods are {methods}")])
        try:
            # each API method is compiled (tf.function traced) when first used: a training run never
            # pays for the methods it does not call (greedy acting, td_errors, q_values, ...)
            return GraphExecutor(self.graph, spaces, backend=self.backend, seed=self.seed, api_methods=methods,
                                 compile="first_call", strategy=self.strategy,
                                 trace=self.config.execution.trace,
                                 replay=self.config.execution.replay)
        except SpacegraphError as exc:
            raise ConfigError(self.config_source, [("", f"the DQN graph does not build: {exc}")]) from None

    def _strategy(self) -> Any:
        """The executor's device strategy from the config's ``execution`` section (replicates update_from_batch;
        replay in the graph is then learned from by draws, `GraphReplay`'s ``sampled``)."""
        return make_strategy(self.config.execution.model_dump(exclude={"trace"}), ["update_from_batch"],
                             where="execution")

    # ---- acting ---------------------------------------------------------------------------------
    def _batch(self, states: Any, space: Space, what: str) -> tuple[np.ndarray, bool]:
        arr = np.asarray(states)
        core = space.shape
        if arr.shape == core:
            return arr[None], True
        if arr.ndim == len(core) + 1 and arr.shape[1:] == core:
            return arr, False
        raise ValueError(f"DQNAgent.{what}: states must have shape {core} (one state) or [N, *{core}]; "
                         f"got {arr.shape}")

    def get_actions(self, states: Any, explore: bool = True, preprocess: bool = True,
                    return_preprocessed: bool = False) -> Any:
        """Actions for a batch of states (or one state), exploring by the epsilon schedule at `timesteps`.

        Args:
            states: observations ``[N, *obs_shape]`` (or one observation), as the environment gives them;
                with ``preprocess=False`` already preprocessed.
            explore: epsilon-greedy (True) or greedy (False).
            preprocess: run the config's preprocessing on ``states`` first.
            return_preprocessed: also return the preprocessed states.

        Returns:
            ``int64`` actions ``[N]`` (a scalar for one state), and the preprocessed states if asked.
        """
        if preprocess:
            space = self.state_space
        else:
            space = self.executor.apis["act_preprocessed"].arg_spaces["preprocessed_states"].with_batch_rank(False)
        if (preprocess and type(states) is np.ndarray and states.ndim == len(self._state_shape) + 1
                and states.shape[1:] == self._state_shape):
            batch, single = states, False  # a batch of observations (a worker's step): `_batch` without its call
        else:
            batch, single = self._batch(states, space, "get_actions")
        if preprocess:
            if explore:
                actions = self.executor.execute("act", batch, np.int64(self.timesteps))
            else:
                actions = self.executor.execute("act_greedy", batch)
            pre = (self.executor.execute("preprocess", batch) if self.graph.preprocessor is not None else batch) \
                if return_preprocessed else None
        else:
            actions = (self.executor.execute("act_preprocessed", batch, np.int64(self.timesteps)) if explore
                       else self.executor.execute("act_greedy_preprocessed", batch))
            pre = batch
        actions = np.asarray(actions)
        if single:
            actions = actions[0]
            pre = pre[0] if pre is not None else None
        return (actions, pre) if return_preprocessed else actions

    def get_actions_and_q_values(self, states: np.ndarray, explore: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``int64[N]`` for a batch of observations ``[N, *obs_shape]`` and the online network's Q-values
        ``float32[N, A]`` they were chosen from, in one forward pass (`get_actions` with the values it used;
        greedy: ``argmax`` of the values).

        Raises:
            ValueError: if ``states`` is not a batch of the state space's shape.
        """
        batch, single = self._batch(states, self.state_space, "get_actions_and_q_values")
        if single:
            raise ValueError(f"DQNAgent.get_actions_and_q_values: states must be a batch [N, *{self._state_shape}]; "
                             f"got one state of shape {np.shape(states)}")
        if explore:
            actions, q_values = self.executor.execute("act_and_q_values", batch, np.int64(self.timesteps))
            return np.asarray(actions), np.asarray(q_values)
        q_values = np.asarray(self.executor.execute("q_values", batch))
        return np.argmax(q_values, axis=-1).astype(np.int64), q_values

    def q_values(self, states: Any) -> np.ndarray:
        """The online network's Q-values ``[N, A]`` for observations."""
        batch, _ = self._batch(states, self.state_space, "q_values")
        return np.asarray(self.executor.execute("q_values", batch))

    def epsilon(self) -> float:
        """The exploration epsilon at the current time step."""
        return float(self.executor.execute("epsilon", np.int64(self.timesteps)))

    # ---- learning ----------------------------------------------------------------------------------
    def _after_update(self, out: Any) -> dict[str, Any]:
        loss, grad_norm, td_errors = out
        self.updates += 1
        if self.updates % self.config.target_sync.every == 0:
            self.executor.execute("sync_target")
        self.last_metrics = {"loss": float(loss), "grad_norm": float(grad_norm)}
        return dict(self.last_metrics, td_errors=np.asarray(td_errors))

    def update(self, batch: dict[str, Any] | None = None) -> dict[str, Any]:
        """One learning step now: from replay (``batch=None``) or from an external batch.

        Args:
            batch: None, or a dict with ``RECORD_KEYS`` arrays (``discounts`` may be left out: then
                ``gamma^n_step`` for every record) and optionally ``importance_weights``.

        Returns:
            ``{"loss", "grad_norm", "td_errors"}``.

        Raises:
            RuntimeError: from replay when it holds fewer records than ``update.batch_size``.
            ValueError: naming a missing key of ``batch``.
        """
        if batch is None:
            self.flush()
            size = self.memory_size()
            if size < self.config.update.batch_size:
                raise RuntimeError(f"DQNAgent.update: replay holds {size} records, fewer than update.batch_size="
                                   f"{self.config.update.batch_size}; observe more first")
            return self._after_update(self.replay.learn(self.executor, self.config.update.batch_size))
        records, weights = self._external(batch)
        return self._after_update(self.executor.execute("update_from_batch", records, weights))

    def _external(self, batch: dict[str, Any]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        if not isinstance(batch, dict):
            raise ValueError(f"DQNAgent.update: batch must be a dict of arrays; got {type(batch).__name__}")
        needed = [k for k in RECORD_KEYS if k != "discounts"]
        missing = [k for k in needed if k not in batch]
        if missing:
            raise ValueError(f"DQNAgent.update: batch lacks {missing}; it needs {needed} (+ optional discounts, "
                             f"importance_weights)")
        n = len(np.asarray(batch["actions"]))
        records = {k: np.asarray(batch[k]) for k in needed}
        records["discounts"] = np.asarray(batch.get("discounts", np.full(n, self.gamma ** self.n_step)), np.float32)
        records["rewards"] = records["rewards"].astype(np.float32)
        weights = np.asarray(batch.get("importance_weights", np.ones(n)), np.float32)
        return records, weights

    def td_errors(self, records: dict[str, Any]) -> np.ndarray:
        """TD errors of a batch of transitions under the current networks (priorities for Ape-X workers)."""
        recs, _ = self._external(records)
        return np.asarray(self.executor.execute("td_errors", recs))

    def updates_due(self) -> int:
        """How many updates the schedule says are due after the env steps observed so far."""
        u = self.config.update
        if self.timesteps < self._updates_due_at:
            return 0
        rounds = (self.timesteps - self._updates_due_at) // u.every + 1
        return rounds * u.repeats

    def update_on_schedule(self) -> list[dict[str, Any]]:
        """Runs the updates that are due (``update.repeats`` every ``update.every`` env steps after
        ``update.start_after``) and the target syncs they bring; returns their metrics."""
        due = self.updates_due()
        if not due:
            return []
        u = self.config.update
        self._updates_due_at += (due // u.repeats) * u.every
        self.flush()
        if self.memory_size() < u.batch_size:
            return []
        return [self.update() for _ in range(due)]

    def sync_target(self) -> None:
        """Synchronises the target network now."""
        self.executor.execute("sync_target")

    # ---- weights and models ---------------------------------------------------------------------------
    def _network_prefix(self) -> str:
        return self.graph.q_network.global_scope + "/"

    def get_weights(self, everything: bool = False) -> dict[str, np.ndarray]:
        """The online Q-network's weights keyed relative to it (``network/dense_0/kernel``), or every
        variable of the graph (replay, optimizer state, target network) keyed by scope path."""
        weights = self.executor.get_weights()
        if everything:
            return weights
        prefix = self._network_prefix()
        return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}

    def set_weights(self, weights: dict[str, Any], sync_target: bool = True) -> None:
        """Loads Q-network weights from `get_weights` (either backend); also into the target network.

        Raises:
            ValueError: naming missing/unexpected keys and shape mismatches (nothing changes then).
        """
        prefix = self._network_prefix()
        own = {k[len(prefix):] for k in self.executor.variables() if k.startswith(prefix)}
        missing, extra = sorted(own - set(weights)), sorted(set(weights) - own)
        if missing or extra:
            raise ValueError(f"DQNAgent.set_weights: keys differ from the Q-network's: missing {missing}, "
                             f"unexpected {extra}")
        self.executor.set_weights({prefix + k: v for k, v in weights.items()}, strict=False)
        if sync_target:
            self._copy_to_target()

    def _copy_to_target(self) -> None:
        online, target = self._network_prefix(), self.graph.target_q_network.global_scope + "/"
        weights = self.executor.get_weights()
        self.executor.set_weights({target + k[len(online):]: v for k, v in weights.items() if k.startswith(online)},
                                  strict=False)

