"""The contenders of the sampling throughput report (RLgraph Fig. 7a), and the configs and environments they step.

Each contender has ``chunk(steps) -> (env steps, frames)``, ``num_envs``, ``frames_per_step``
and ``close()``:

* `RawContender`: N environments in a `VectorEnv` stepped with uniformly random actions;
* `WorkerContender`: `VectorEnvWorker` with a DQN agent acting (explore) and observing, never
  updating, its calls timed on CPU time (`TimedAgent`) for a breakdown;
* `DirectLoopContender`: the same `VectorEnv` with the agent's Q-network written by hand and called
  directly (acting and stepping only: the floor for a worker that does not observe);
* `RLlibContender`: RLlib's DQN env runner (new API stack, PyTorch) sampling, no learner.

Importing this module sets ``OPENBLAS_NUM_THREADS=1`` unless it is set (NumPy's BLAS
threads slow the env-side frame resizing down by more than 10x on a loaded 2-core machine).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from harness.measure.timing import CpuTimedCalls  # noqa: E402
from spacegraph.reports.rllib import import_rllib_safely, rllib_missing  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "reference_agents" / "configs"
PONG_CONFIG = CONFIG_DIR / "dqn_pong.yaml"
CARTPOLE_CONFIG = CONFIG_DIR / "dqn_cartpole.yaml"
NUM_ENVS = (1, 2, 4, 8)
BACKENDS = ("tf", "torch")
#: Replay capacity the agents are built with here: the memory is filled and wraps, and its
#: size does not change the cost of an insert, while a full-size Atari memory would take GBs.
SAMPLING_CAPACITY = 10_000
#: The exploration probability of the hand-written act (`HandActingAgent`, `DirectLoopContender`).
HAND_EPSILON = 0.1
#: RLlib's Nature CNN: [filters, kernel, stride, padding].
RLLIB_CONV_FILTERS = [[32, 8, 4, "valid"], [64, 4, 2, "valid"], [64, 3, 1, "valid"]]


# ---- configs and environments -------------------------------------------------------------------
def load_config(config: str | os.PathLike | dict[str, Any], capacity: int | None = SAMPLING_CAPACITY
                ) -> dict[str, Any]:
    """The agent config as a checked dict, with the replay capacity set to ``capacity`` (None: as it is).

    Raises:
        ConfigError: (from ``reference_agents.agents``) naming the file and key path of a bad config.
    """
    from reference_agents.agents import load_config

    cfg, _ = load_config(config)
    data = cfg.model_dump(by_alias=True)
    if capacity is not None:
        data["memory"]["capacity"] = int(capacity)
    return data


def env_factory(config: dict[str, Any]) -> Callable[[], Any]:
    """A no-argument callable making the environment ``config["env"]`` names (Atari-wrapped when it says so)."""
    from reference_agents.workers import make_env

    env = config["env"]
    env_id, atari, kwargs = env["id"], bool(env.get("atari", False)), dict(env.get("kwargs") or {})

    def make() -> Any:
        return make_env(env_id, atari=atari, **kwargs)
    make.__name__ = f"{env_id}{' (atari)' if atari else ''}"
    return make


def bare_factory(config: dict[str, Any]) -> Callable[[], Any]:
    """A callable making the config's environment id with gymnasium's defaults (no Atari wrapping)."""
    from reference_agents.workers import make_env

    env_id = config["env"]["id"]

    def make() -> Any:
        return make_env(env_id)
    make.__name__ = env_id
    return make


# ---- contenders: each is an object with chunk(steps) -> (env steps, frames), close() -------------
class RawContender:
    """N environments of a factory stepped in lockstep with uniformly random actions."""

    def __init__(self, factory: Callable[[], Any], num_envs: int, seed: int = 0) -> None:
        from reference_agents.workers import VectorEnv

        self.envs = VectorEnv(factory, num_envs)
        self.num_envs = num_envs
        self.frames_per_step = self.envs.frames_per_step
        self.rng = np.random.default_rng(seed)
        self.num_actions = int(self.envs.action_space.n)
        self.envs.reset(seed=seed)

    def chunk(self, steps: int) -> tuple[int, int]:
        """Steps until at least ``steps`` env steps (summed over environments) are done."""
        done = 0
        while done < steps:
            self.envs.step(self.rng.integers(0, self.num_actions, self.num_envs))
            done += self.num_envs
        return done, int(round(done * self.frames_per_step))

    def close(self) -> None:
        self.envs.close()


class TimedAgent(CpuTimedCalls):
    """Delegates to an agent, adding up the CPU seconds spent in its acting and observing calls.

    Attributes:
        seconds: ``{"get_actions": s, "observe": s, "flush": s}`` (process CPU time) since the last `reset`.
    """

    TIMED = ("get_actions", "observe", "flush")


class WorkerContender:
    """`VectorEnvWorker` with an agent acting (explore) and observing, never updating.

    `DQNAgent.observe` stages transitions (n-step folding); they reach the replay memory
    when the agent flushes them, which its update schedule does before updating. With no
    updates, each chunk ends with ``agent.flush()`` (one batched insert), so the replay
    insert is part of the measured work.

    The agent is wrapped in a `TimedAgent`, so `breakdown` can say which share of the
    time went to ``get_actions``, to ``observe`` plus ``flush`` and to the rest (stepping
    the environments, the worker's own bookkeeping).
    """

    def __init__(self, agent: Any, factory: Callable[[], Any], num_envs: int, seed: int = 0,
                 observe: bool = True, timed: bool = True) -> None:
        from reference_agents.workers import VectorEnvWorker

        # timed=False: the agent itself, without the two clock reads per call a breakdown needs (for ratios
        # against a hand-written loop, which reads no clocks either); `breakdown` is then unavailable.
        self.timed = TimedAgent(agent) if timed else agent
        self.worker = VectorEnvWorker(self.timed, factory, num_envs=num_envs, seed=seed, observe=observe,
                                      update=False, explore=True)
        self.num_envs = num_envs
        self.frames_per_step = self.worker.frames_per_step

    def chunk(self, steps: int) -> tuple[int, int]:
        """``worker.run(num_steps=steps)`` then ``agent.flush()``; the worker's own step and frame counts."""
        stats = self.worker.run(num_steps=steps)
        if hasattr(self.timed, "flush"):
            self.timed.flush()
        return stats.steps, stats.frames

    def reset_breakdown(self) -> None:
        """Starts the act/observe time accounting over (nothing to do when not timed)."""
        if isinstance(self.timed, TimedAgent):
            self.timed.reset()

    def breakdown(self, seconds: float) -> dict[str, float]:
        """Shares of ``seconds`` (the CPU time of the timed rounds since `reset_breakdown`) spent acting, observing
        (staging and inserting into replay) and elsewhere; empty when not timed."""
        if not isinstance(self.timed, TimedAgent):
            return {}
        act = self.timed.seconds["get_actions"]
        observe = self.timed.seconds["observe"] + self.timed.seconds["flush"]
        return {"act_share": act / seconds, "observe_share": observe / seconds,
                "other_share": max(0.0, 1.0 - (act + observe) / seconds)}

    def close(self) -> None:
        self.worker.close()


class HandActingAgent:
    """What a `VectorEnvWorker` calls on an agent to act (``get_actions``, ``state_space``, ``action_space``,
    ``config``), answered by hand-written code: the agent's Q-network written directly on its backend
    (`q_network_by_hand`) and epsilon-greedy in NumPy (``epsilon`` fixed). The worker acting through it costs what
    the worker itself costs (its stepping and bookkeeping) without the framework's act; `DirectLoopContender`
    acts through it too. It declares the agent's action space, as the agent does, so the worker treats both alike.

    Args:
        agent: a built `DQNAgent` (its weights are copied once).
        num_actions: the number of discrete actions.
        epsilon: the exploration probability.
        seed: the NumPy generator's seed.
    """

    def __init__(self, agent: Any, num_actions: int, epsilon: float = HAND_EPSILON, seed: int = 0) -> None:
        self.q_values = q_network_by_hand(agent)
        # the agent's action space: every action drawn here is in it (argmax over its actions, uniform draws of them)
        self.state_space, self.action_space, self.config = agent.state_space, agent.action_space, agent.config
        self.n_step, self.gamma = agent.n_step, agent.gamma  # what a folding worker asks the agent for
        self.num_actions, self.epsilon = int(num_actions), float(epsilon)
        self.rng = np.random.default_rng(seed)

    def get_actions(self, states: np.ndarray, explore: bool = True) -> np.ndarray:
        """Greedy actions of the hand-written Q-network, each replaced by a uniform one with probability epsilon.
        (The Q-values are computed for every state either way, as the framework's act does.)"""
        greedy = np.argmax(self.q_values(states), axis=-1)
        if not explore:
            return greedy
        n = len(greedy)
        return np.where(self.rng.random(n) < self.epsilon, self.rng.integers(0, self.num_actions, n), greedy)


class DirectLoopContender:
    """The loop a worker replaces, written by hand: the same `VectorEnv`, the agent's Q-network called directly.

    Each step acts with a `HandActingAgent` (the DQN agent's online Q-network, its weights copied once, as
    hand-written code on the agent's backend, and epsilon-greedy in NumPy with ``epsilon`` fixed) on the
    observations and steps the environments. Nothing is observed or stored: this is the floor for acting and
    stepping, what `WorkerContender` with ``observe=False`` does through the framework.
    """

    def __init__(self, agent: Any, factory: Callable[[], Any], num_envs: int, seed: int = 0,
                 epsilon: float = HAND_EPSILON) -> None:
        from reference_agents.workers import VectorEnv

        self.envs = VectorEnv(factory, num_envs)
        self.num_envs = num_envs
        self.frames_per_step = self.envs.frames_per_step
        self.actor = HandActingAgent(agent, int(self.envs.action_space.n), epsilon, seed)
        self.obs = self.envs.reset(seed=seed)

    def chunk(self, steps: int) -> tuple[int, int]:
        """Acts and steps until at least ``steps`` env steps (summed over environments) are done."""
        done, n, act = 0, self.num_envs, self.actor.get_actions
        while done < steps:
            self.obs = self.envs.step(act(self.obs))[5]
            done += n
        return done, int(round(done * self.frames_per_step))

    def close(self) -> None:
        self.envs.close()


def q_network_by_hand(agent: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The DQN agent's online Q-network as hand-written code on its backend: NumPy observations in, Q-values out.

    Covers the two networks the sampling configs use: the Nature CNN with a dueling head on uint8
    frames divided by 255 (`act_throughput.hand_written`, wrapped to take the uint8 frames), and a
    one-hidden-layer relu MLP with a dueling head. Checked against the agent's own ``q_values`` on
    observations drawn from its state space before it is returned.

    Raises:
        ValueError: for another network; AssertionError when the hand-written Q-values differ.
    """
    from spacegraph.reports.act_throughput import hand_written

    backend = agent.executor.backend.name
    weights = {k: v for k, v in agent.executor.get_weights().items() if "/q_network/" in f"/{k}"}
    layers = [k.split("/")[-2] for k in weights if "/network/" in k and k.endswith("/kernel")]
    if layers == ["conv2d_0", "conv2d_1", "conv2d_2", "dense_4"]:
        q = _uint8_frames(backend, hand_written(backend, weights))
    elif layers == ["dense_0"]:
        def weight(path: str) -> np.ndarray:
            return next(v for k, v in weights.items() if k.endswith(f"/q_network/{path}"))
        q = _dueling_mlp(backend, *(weight(f"{layer}/{kind}") for layer in ("network/dense_0", "dueling_head/value",
                                                                            "dueling_head/advantage")
                                    for kind in ("kernel", "bias")))
    else:
        raise ValueError(f"q_network_by_hand: no hand-written network for the layers {layers}")
    probe = agent.state_space.with_batch_rank().sample(size=5, rng=0)
    np.testing.assert_allclose(q(probe), agent.executor.execute("q_values", probe), rtol=1e-4, atol=1e-4)
    return q


def _uint8_frames(backend: str, actor: Callable[[Any], Any]) -> Callable[[np.ndarray], np.ndarray]:
    """``actor`` (float32 frames in [0, 1]) taking uint8 frames, divided by 255 inside the backend call."""
    if backend == "torch":
        import torch

        def q_torch(obs: np.ndarray) -> np.ndarray:
            return actor(torch.from_numpy(obs).to(torch.float32).mul_(1.0 / 255.0)).numpy()
        return q_torch
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, 84, 84, 4], tf.uint8)], autograph=False)
    def scaled(obs: Any) -> Any:
        return actor(tf.cast(obs, tf.float32) / 255.0)
    return lambda obs: scaled(obs).numpy()


def _dueling_mlp(backend: str, k0: np.ndarray, b0: np.ndarray, vk: np.ndarray, vb: np.ndarray, ak: np.ndarray,
                 ab: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``h = relu(x @ k0 + b0)`` then the dueling head ``V + A - mean(A)`` by hand, NumPy in and out."""
    if backend == "torch":
        import torch

        t = torch.from_numpy
        k0_, b0_, vk_, vb_, ak_, ab_ = (t(np.array(w)) for w in (k0, b0, vk, vb, ak, ab))

        @torch.no_grad()
        def q_torch(obs: np.ndarray) -> np.ndarray:
            h = torch.relu(torch.addmm(b0_, t(obs), k0_))  # addmm: what torch.nn.Linear runs
            a = torch.addmm(ab_, h, ak_)
            return (torch.addmm(vb_, h, vk_) + a - a.mean(-1, keepdim=True)).numpy()
        return q_torch
    import tensorflow as tf

    k0_, b0_, vk_, vb_, ak_, ab_ = (tf.constant(w) for w in (k0, b0, vk, vb, ak, ab))

    @tf.function(input_signature=[tf.TensorSpec([None, k0.shape[0]], tf.float32)], autograph=False)
    def q_tf(obs: Any) -> Any:
        h = tf.nn.relu(tf.matmul(obs, k0_) + b0_)
        a = tf.matmul(h, ak_) + ab_
        return tf.matmul(h, vk_) + vb_ + a - tf.reduce_mean(a, axis=-1, keepdims=True)
    return lambda obs: q_tf(obs).numpy()


class RLlibContender:
    """RLlib's DQN env runner (new API stack) sampling on N copies of the environment; no learner.

    Args:
        factory: makes one environment (observations uint8 images ``[H,W,C]``; scaled env-side
            to float32 ``[0, 1]`` for RLlib's CNN).
        num_envs: ``num_envs_per_env_runner``.
        seed: the env runner's seed.
        dueling: RLlib's ``dueling`` (a value and an advantage head, each with a 512 hidden layer).
    """

    _registered: set[str] = set()

    def __init__(self, factory: Callable[[], Any], num_envs: int, seed: int = 0, dueling: bool = True) -> None:
        import_rllib_safely()
        from ray.rllib.algorithms.dqn import DQNConfig
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
        from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
        from ray.tune.registry import register_env

        from reference_agents.workers import frames_per_step

        name = f"spacegraph-sampling-{factory.__name__}"
        register_env(name, lambda _cfg: ScaledImageEnv(factory()))
        config = (DQNConfig()
                  .environment(name)
                  .framework("torch")
                  .env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs, explore=True)
                  .debugging(seed=seed)
                  .training(dueling=dueling, double_q=True)
                  .rl_module(model_config=DefaultModelConfig(conv_filters=RLLIB_CONV_FILTERS, conv_activation="relu",
                                                             head_fcnet_hiddens=[512])))
        self.runner = SingleAgentEnvRunner(config=config)
        self.num_envs = num_envs
        self.frames_per_step = frames_per_step(self.runner.env.unwrapped.envs[0])
        self.module_text = str(self.runner.module)

    def chunk(self, steps: int) -> tuple[int, int]:
        """``runner.sample(num_timesteps=steps, explore=True)``; env steps counted from the episodes returned."""
        episodes = self.runner.sample(num_timesteps=steps, explore=True)
        done = sum(len(e) for e in episodes)
        return done, int(round(done * self.frames_per_step))

    def close(self) -> None:
        self.runner.stop()


class ScaledImageEnv(gym.Env):
    """A gymnasium ``Env`` around an environment with uint8 image observations, scaling them to float32 ``[0, 1]``.

    RLlib's torch CNN takes float images, and gymnasium's vector envs take only
    ``gymnasium.Env`` subclasses; the wrapped environment stays reachable as ``.env``
    (so `frames_per_step` finds its frame skip).

    Raises:
        ValueError: when the wrapped environment's observations are not a uint8 ``Box``.
    """

    metadata: dict[str, Any] = {}

    def __init__(self, env: Any) -> None:
        space = env.observation_space
        if not (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8):
            raise ValueError(f"ScaledImageEnv: expected uint8 image observations (a Box); got {space}")
        self.env = env
        self.observation_space = gym.spaces.Box(0.0, 1.0, space.shape, np.float32)
        self.action_space = env.action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        return np.asarray(obs, np.float32) / np.float32(255.0), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return np.asarray(obs, np.float32) / np.float32(255.0), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()


def rllib_available() -> str | None:
    """None when RLlib's DQN and env runner import, else why not (for skipping)."""
    return rllib_missing("ray.rllib.algorithms.dqn", "ray.rllib.env.single_agent_env_runner")
