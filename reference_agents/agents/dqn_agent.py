"""`DQNAgent`: the agent API of the RLgraph paper (Listing 2) over a built `DQNGraph`, on TF or PyTorch."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Sequence

import numpy as np

from harness.execution.executor import GraphExecutor
from harness.execution.serialization import atomic_file
from harness.graph.errors import SpacegraphError
from harness.spaces import BoolBox, Dict, FloatBox, IntBox, Space, parse
from reference_agents.agents.config import ConfigError, load_agent_config
from reference_agents.agents.dqn_graph import RECORD_KEYS, DQNGraph
from reference_agents.components.helpers import NStepAccumulator
from reference_agents.components.nn.network import nature_dqn_layers

CHECKPOINT_WEIGHTS = "agent_variables.npz"
CHECKPOINT_STATE = "agent_state.npz"


def _as_space(space: Any, what: str) -> Space:
    if isinstance(space, Space):
        return space
    if isinstance(space, str):
        return parse(space)
    raise TypeError(f"DQNAgent: {what} must be a Space or its text form; got {space!r}")


def _atomic_savez(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Writes an ``.npz`` beside ``path`` and renames it into place (an error never leaves half a file)."""
    with atomic_file(path, suffix=".npz") as fh:
        np.savez(fh, **arrays)


class DQNAgent:
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
        config: a config file (YAML/JSON), dict or `DQNConfig` (see `reference_agents.agents.config`).
        backend: overrides the config's ``backend`` (``"tf"`` or ``"torch"``).
        seed: overrides the config's ``seed`` (initial weights, exploration and replay sampling).
        state_space: the observation space without batch rank (default: the config env's).
        action_space: an ``IntBox(n)`` (default: the config env's).

    Raises:
        ConfigError: naming the config file and key path for a bad config (component arguments included).
    """

    def __init__(self, config: Any, backend: str | None = None, seed: int | None = None,
                 state_space: Space | str | None = None, action_space: Space | str | None = None) -> None:
        self.config, self.config_source = load_agent_config(config, {"backend": backend, "seed": seed})
        cfg = self.config
        if state_space is None or action_space is None:
            from reference_agents.environments import env_spaces

            env_state, env_action = env_spaces(cfg.env.id, atari=cfg.env.atari, **cfg.env.kwargs)
            state_space = state_space if state_space is not None else env_state
            action_space = action_space if action_space is not None else env_action
        self.state_space = _as_space(state_space, "state_space").with_batch_rank(False)
        self.action_space = _as_space(action_space, "action_space")
        if not (isinstance(self.action_space, IntBox) and self.action_space.shape == ()
                and self.action_space.bounded and int(self.action_space.low) == 0):
            raise ConfigError(self.config_source, [("env", f"DQN needs a discrete action space IntBox(n) "
                                                           f"(int64[](0,n-1)); the env has {self.action_space!r}")])
        self.num_actions = int(self.action_space.high) + 1
        self.backend = cfg.backend
        self.seed = cfg.seed
        self.gamma, self.n_step = float(cfg.loss.gamma), int(cfg.loss.n_step)
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

    def _make_graph(self) -> DQNGraph:
        cfg = self.config
        layers = nature_dqn_layers() if cfg.network.layers == "nature" else cfg.network.layers
        memory = cfg.memory.model_dump()
        if memory["type"] == "replay":
            memory = {"type": "replay", "capacity": memory["capacity"]}
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

        probe = GraphExecutor(PreprocessorStack(self.config.preprocessing, scope="probe"),
                              {"inputs": self.state_space.with_batch_rank()}, backend=self.backend, seed=self.seed)
        return probe.apis["preprocess"].output_space

    def record_space(self) -> Dict:
        """The space of one batch of replay records (observations as the environment gives them)."""
        return Dict(states=self.state_space, actions=IntBox(self.num_actions), rewards=FloatBox(()),
                    terminals=BoolBox(), next_states=self.state_space,
                    discounts=FloatBox((), 0.0, 1.0)).with_batch_rank()

    def _build(self) -> GraphExecutor:
        states = self.state_space.with_batch_rank()
        spaces = {"states": states, "time_step": "int64[]", "records": self.record_space(),
                  "batch_size": "int64[]", "importance_weights": "float32[B]"}
        methods = ["q_values", "act", "act_greedy", "act_preprocessed", "act_greedy_preprocessed", "epsilon",
                   "insert_records", "memory_size", "update_from_memory", "update_from_batch", "td_errors",
                   "sync_target"]
        if self.graph.preprocessor is not None:
            methods.append("preprocess")
        spaces["preprocessed_states"] = self._preprocessed_space()
        try:
            return GraphExecutor(self.graph, spaces, backend=self.backend, seed=self.seed, api_methods=methods)
        except SpacegraphError as exc:
            raise ConfigError(self.config_source, [("", f"the DQN graph does not build: {exc}")]) from None

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
        pre_space = self.executor.apis["act_preprocessed"].arg_spaces["preprocessed_states"]
        space = self.state_space if preprocess else pre_space.with_batch_rank(False)
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

    def q_values(self, states: Any) -> np.ndarray:
        """The online network's Q-values ``[N, A]`` for observations."""
        batch, _ = self._batch(states, self.state_space, "q_values")
        return np.asarray(self.executor.execute("q_values", batch))

    def epsilon(self) -> float:
        """The exploration epsilon at the current time step."""
        return float(self.executor.execute("epsilon", np.int64(self.timesteps)))

    # ---- observing --------------------------------------------------------------------------------
    def observe(self, states: Any, actions: Any, rewards: Any, terminals: Any, next_states: Any,
                env_id: Any = None, truncated: Any = None) -> None:
        """Takes one environment step of N environments (or of one, unbatched) and stages its transitions.

        Args:
            states: the observations acted on, ``[N, *obs_shape]``.
            actions: the actions taken, ``[N]``.
            rewards: ``[N]``.
            terminals: gymnasium's ``terminated``, ``[N]`` bools: no bootstrap from these next states.
            next_states: the observations after the step (for an episode that ended, its *final*
                observation, not the reset one), ``[N, *obs_shape]``.
            env_id: which environment each row came from (default ``0..N-1``); n-step windows are
                kept per environment.
            truncated: gymnasium's ``truncated`` (time limits), ``[N]`` bools (default all False):
                these transitions bootstrap.

        Raises:
            ValueError: naming the argument whose shape or length does not fit.
        """
        batch, single = self._batch(states, self.state_space, "observe")
        n = batch.shape[0]
        nxt, _ = self._batch(next_states, self.state_space, "observe (next_states)")

        def column(value: Any, name: str, dtype: Any) -> np.ndarray:
            arr = np.asarray(value, dtype=dtype).reshape(-1) if value is not None else np.zeros(n, dtype)
            if arr.shape != (n,):
                raise ValueError(f"DQNAgent.observe: {name} must have one entry per state ({n}); got shape "
                                 f"{np.shape(value)}")
            return arr

        actions_ = column(actions, "actions", np.int64)
        if np.any((actions_ < 0) | (actions_ >= self.num_actions)):
            raise ValueError(f"DQNAgent.observe: actions must lie in 0..{self.num_actions - 1}; got {actions_}")
        rewards_ = column(rewards, "rewards", np.float64)
        terminals_ = column(terminals, "terminals", bool)
        truncated_ = column(truncated, "truncated", bool)
        ids = column(list(range(n)) if env_id is None else env_id, "env_id", np.int64)
        if nxt.shape[0] != n:
            raise ValueError(f"DQNAgent.observe: next_states has {nxt.shape[0]} rows, states {n}")
        for i in range(n):
            acc = self._accumulators.get(int(ids[i]))
            if acc is None:
                acc = self._accumulators[int(ids[i])] = NStepAccumulator(self.n_step, self.gamma)
            self._staged += acc.push(batch[i], actions_[i], rewards_[i], nxt[i], bool(terminals_[i]),
                                     bool(truncated_[i]) and not bool(terminals_[i]))
        self.timesteps += n
        if len(self._staged) >= self.flush_every:
            self.flush()

    def observe_transitions(self, records: dict[str, Any], count_steps: bool = True) -> None:
        """Stages transitions folded elsewhere (worker-side n-step): a dict of ``RECORD_KEYS`` arrays.

        Args:
            records: ``states``, ``actions``, ``rewards``, ``terminals``, ``next_states``, ``discounts`` (``gamma^k``).
            count_steps: add the number of records to `timesteps` (each stands for one env step).
        """
        missing = [k for k in RECORD_KEYS if k not in records]
        if missing:
            raise ValueError(f"DQNAgent.observe_transitions: records lack {missing}; they need {list(RECORD_KEYS)}")
        n = len(records["actions"])
        for i in range(n):
            self._staged.append({k: records[k][i] for k in RECORD_KEYS})
        if count_steps:
            self.timesteps += n
        if len(self._staged) >= self.flush_every:
            self.flush()

    def _records(self, rows: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        return {
            "states": np.stack([r["states"] for r in rows]).astype(self.state_space.dtype, copy=False),
            "actions": np.asarray([r["actions"] for r in rows], np.int64),
            "rewards": np.asarray([r["rewards"] for r in rows], np.float32),
            "terminals": np.asarray([r["terminals"] for r in rows], bool),
            "next_states": np.stack([r["next_states"] for r in rows]).astype(self.state_space.dtype, copy=False),
            "discounts": np.asarray([r["discounts"] for r in rows], np.float32),
        }

    def flush(self) -> int:
        """Writes the staged transitions into replay in one call; returns how many."""
        if not self._staged:
            return 0
        rows, self._staged = self._staged, []
        self.executor.execute("insert_records", self._records(rows))
        return len(rows)

    def memory_size(self) -> int:
        """The number of records in replay (staged ones not included)."""
        return int(self.executor.execute("memory_size"))

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
            return self._after_update(self.executor.execute("update_from_memory",
                                                            np.int64(self.config.update.batch_size)))
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

    def export_model(self, path: str) -> str:
        """Writes the Q-network's weights and the config to ``path`` (``.npz``, atomically); returns the path."""
        path = os.fspath(path)
        if not path.endswith(".npz"):
            path += ".npz"
        meta = {"format": "spacegraph-dqn-model", "config": self.config.model_dump(by_alias=True),
                "backend": self.backend, "state_space": repr(self.state_space), "num_actions": self.num_actions}
        arrays = {"__meta__": np.array(json.dumps(meta))}
        arrays.update({f"w:{k}": v for k, v in self.get_weights().items()})
        _atomic_savez(path, arrays)
        return path

    def import_model(self, path: str) -> None:
        """Loads a file `export_model` wrote (from either backend) into the online and target networks.

        Raises:
            ValueError: naming the file and what does not fit; the agent is unchanged then.
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
                weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"DQNAgent.import_model: {path} is not a DQN model file: {exc}") from None
        if meta.get("format") != "spacegraph-dqn-model":
            raise ValueError(f"DQNAgent.import_model: {path} is not a DQN model file (format {meta.get('format')!r})")
        if meta.get("num_actions") != self.num_actions or meta.get("state_space") != repr(self.state_space):
            raise ValueError(f"DQNAgent.import_model: {path} is for states {meta.get('state_space')} and "
                             f"{meta.get('num_actions')} actions; this agent has {self.state_space!r} and "
                             f"{self.num_actions}")
        try:
            self.set_weights(weights)
        except ValueError as exc:
            raise ValueError(f"DQNAgent.import_model: {path}: {exc}") from None

    # ---- checkpoints --------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The Python-side state: counters, open n-step windows and staged transitions."""
        return {"timesteps": self.timesteps, "updates": self.updates, "updates_due_at": self._updates_due_at,
                "accumulators": {str(k): a.state_dict() for k, a in self._accumulators.items()},
                "staged": list(self._staged)}

    def save_checkpoint(self, directory: str) -> str:
        """Writes everything needed to continue training into ``directory``: every graph variable (networks,
        target, optimizer state, replay contents) and the Python-side state. Files are replaced atomically,
        so an interrupted save leaves the previous checkpoint intact. Returns the directory."""
        os.makedirs(directory, exist_ok=True)
        self.flush()  # staged transitions go to replay, where the variables keep them
        _atomic_savez(os.path.join(directory, CHECKPOINT_WEIGHTS),
                      {f"w:{k}": v for k, v in self.executor.get_weights().items()})
        state = self.state_dict()
        windows = {}
        for env, acc in state["accumulators"].items():
            for j, (s, a, r) in enumerate(acc["steps"]):
                windows[f"s:{env}:{j}"] = np.asarray(s)
                windows[f"a:{env}:{j}"] = np.asarray(a)
                windows[f"r:{env}:{j}"] = np.asarray(r)
            if acc["steps"]:
                windows[f"next:{env}"] = np.asarray(acc["last_next_state"])
            acc["steps"] = len(acc["steps"])
            acc.pop("last_next_state")
        meta = {"format": "spacegraph-dqn-checkpoint", "config": self.config.model_dump(by_alias=True),
                "backend": self.backend, "state_space": repr(self.state_space),
                "action_space": repr(self.action_space), "saved_at": time.time(),
                "timesteps": state["timesteps"], "updates": state["updates"],
                "updates_due_at": state["updates_due_at"], "accumulators": state["accumulators"]}
        _atomic_savez(os.path.join(directory, CHECKPOINT_STATE), {"__meta__": np.array(json.dumps(meta)), **windows})
        return directory

    def restore(self, directory: str) -> None:
        """Loads a checkpoint `save_checkpoint` wrote (either backend) into this agent.

        Environment states are not part of a checkpoint, so the episodes in progress when it was
        saved cannot continue: their open n-step windows are closed as cut short (bootstrapping
        from the last observed state with ``gamma^k``, like a time limit) and staged for replay.

        Raises:
            ValueError: naming the directory and what is missing or does not fit; nothing changes then.
        """
        weights_path = os.path.join(directory, CHECKPOINT_WEIGHTS)
        state_path = os.path.join(directory, CHECKPOINT_STATE)
        try:
            with np.load(state_path, allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
                arrays = {k: data[k] for k in data.files if k != "__meta__"}
            with np.load(weights_path, allow_pickle=False) as data:
                weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"DQNAgent.restore: {directory} holds no readable agent checkpoint: {exc}") from None
        if meta.get("state_space") != repr(self.state_space) or meta.get("action_space") != repr(self.action_space):
            raise ValueError(f"DQNAgent.restore: {directory} is for states {meta.get('state_space')} and actions "
                             f"{meta.get('action_space')}; this agent has {self.state_space!r} and "
                             f"{self.action_space!r}")
        try:
            self.executor.set_weights(weights)
        except ValueError as exc:
            raise ValueError(f"DQNAgent.restore: {weights_path}: {exc} (was it saved with another config?)") from None
        self.timesteps, self.updates = int(meta["timesteps"]), int(meta["updates"])
        self._updates_due_at = int(meta["updates_due_at"])
        self._accumulators = {}
        self._staged = []
        for env, acc in meta["accumulators"].items():
            steps = [(arrays[f"s:{env}:{j}"], arrays[f"a:{env}:{j}"].item(), float(arrays[f"r:{env}:{j}"]))
                     for j in range(acc["steps"])]
            restored = NStepAccumulator(acc["n"], acc["gamma"])
            restored.load_state_dict({"n": acc["n"], "gamma": acc["gamma"], "steps": steps,
                                      "last_next_state": arrays.get(f"next:{env}")})
            self._staged += restored.flush()
            self._accumulators[int(env)] = restored

    @classmethod
    def load_checkpoint(cls, directory: str, backend: str | None = None) -> "DQNAgent":
        """A new agent built from the config saved in ``directory`` (on ``backend`` or the saved one), restored."""
        try:
            with np.load(os.path.join(directory, CHECKPOINT_STATE), allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"DQNAgent.load_checkpoint: {directory} holds no readable agent checkpoint: "
                             f"{exc}") from None
        agent = cls(meta["config"], backend=backend or meta["backend"], state_space=meta["state_space"],
                    action_space=meta["action_space"])
        agent.restore(directory)
        return agent
