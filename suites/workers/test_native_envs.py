"""The native Atari vectorizers (``env.vectorizer: ale | envpool``) against the python path (`VectorEnv` over
`AtariFrames`), played with the same seeds and action scripts.

What is compared exactly and what statistically (and why) is in ``docs/workers.md``: ale-py's native env
runs the same emulator as the python path, so with sticky actions off rewards and episode ends are identical,
while its frames are resized with another filter (area, not bilinear: about 1 gray level apart per pixel).
EnvPool 1.2.5 bundles its own ALE build and max-pools the last two frames of a step (no switch), so its game
drifts from ale-py's after a few hundred steps even with sticky actions off: its first frames, episode ends by
the time limit and point rates are compared. Under sticky actions the native random streams are not ale-py's
gymnasium env's (seeding the same seed still gives other repeats), so runs are compared for reproducibility and
point rates.
"""

from __future__ import annotations

import importlib.util
import math
from types import SimpleNamespace
from typing import get_args

import numpy as np
import pytest

from reference_agents.agents.config import ConfigError, EnvConfig, Section, load_agent_config
from reference_agents.workers.native_envs import VECTORIZERS, NativeAtariVectorEnv, make_vector_env

HAS_ALE = importlib.util.find_spec("ale_py") is not None and importlib.util.find_spec("ale_py.vector_env") is not None
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
needs_ale = pytest.mark.skipif(not HAS_ALE, reason="ale-py >= 0.11 (its native AtariVectorEnv) is not installed")
needs_envpool = pytest.mark.skipif(not (HAS_ALE and HAS_ENVPOOL),
                                   reason="EnvPool is not installed (pip install 'spacegraph[envpool]')")

PONG = "ALE/Pong-v5"
N, STEPS = 3, 500
#: Episodes end by the time limit at step 400 (Pong episodes of a random policy last longer), then restart:
#: the comparison covers resets and the stacks after them.
SHORT = {"atari": True, "max_num_frames_per_episode": 1600}


class _EnvOnly(Section):   # a config of the env section alone, checked as an agent config's
    env: EnvConfig


def play(vectorizer: str, steps: int = STEPS, seed: int = 5, **kwargs) -> dict[str, np.ndarray]:
    """Plays a fixed random action script on ``N`` Pong environments; returns every step's outputs."""
    envs = make_vector_env(PONG, N, dict(SHORT, vectorizer=vectorizer, **kwargs))
    script = np.random.default_rng(0).integers(0, 6, size=(steps, N))
    out = {"act_on": [envs.reset(seed=seed)], "next_obs": [], "rewards": [], "terminated": [], "truncated": [],
           "done": []}
    try:
        for actions in script:
            next_obs, rewards, terminated, truncated, infos, act_on = envs.step(actions)
            assert len(infos) == N
            assert (next_obs is act_on) == (envs.done_indices.size == 0)
            for key, value in (("act_on", act_on), ("next_obs", next_obs), ("rewards", rewards),
                               ("terminated", terminated), ("truncated", truncated),
                               ("done", np.isin(np.arange(N), envs.done_indices))):
                out[key].append(np.array(value))
    finally:
        envs.close()
    return {k: np.stack(v) for k, v in out.items()}


def check_stacks(run: dict[str, np.ndarray]) -> None:
    """The observation semantics the agents rely on: ``uint8[N,84,84,4]`` stacks, oldest frame first, one new
    frame per step; an ended episode's final stack goes to ``next_obs`` and its new first frame fills the
    whole stack acted on."""
    act_on, next_obs, done = run["act_on"], run["next_obs"], run["done"]
    assert act_on.shape[1:] == (N, 84, 84, 4) and act_on.dtype == np.uint8
    assert (act_on[0] == act_on[0][..., :1]).all(), "a reset stack must be the first frame 4 times"
    for t in range(len(next_obs)):
        np.testing.assert_array_equal(next_obs[t][..., :3], act_on[t][..., 1:], err_msg=f"step {t}: not shifted")
        for i in range(N):
            if done[t, i]:
                assert (act_on[t + 1, i] == act_on[t + 1, i][..., :1]).all(), f"step {t} env {i}: reset stack"
            else:
                np.testing.assert_array_equal(act_on[t + 1, i], next_obs[t, i])


def poisson_p(a: int, b: int) -> float:
    """Two-sided p-value that two Poisson counts over equal exposure have the same rate (conditional binomial
    test: ``a ~ Binomial(a + b, 1/2)``)."""
    n = a + b
    tail = sum(math.comb(n, k) for k in range(min(a, b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@pytest.fixture(scope="module")
def python_run() -> dict[str, np.ndarray]:
    return play("python", repeat_action_probability=0.0)


@needs_ale
def test_ale_plays_the_same_game_as_the_python_path_without_sticky_actions(python_run):
    """Same emulator and settings: identical rewards, terminations, truncations and episode ends; frames
    only differ by the resize filter (area vs bilinear)."""
    native = play("ale", repeat_action_probability=0.0)
    check_stacks(python_run)
    check_stacks(native)
    assert np.count_nonzero(python_run["rewards"]) >= 10 and python_run["done"].sum() == N  # not vacuous
    for key in ("rewards", "terminated", "truncated", "done"):
        np.testing.assert_array_equal(native[key], python_run[key], err_msg=key)
    diff = np.abs(native["act_on"].astype(np.int16) - python_run["act_on"]).mean(axis=(1, 2, 3, 4))
    assert diff.mean() < 1.5 and diff.max() < 3.0, (diff.mean(), diff.max())   # seen: 0.9 and 1.3
    newest = np.abs(native["next_obs"][..., -1].astype(np.int16) - python_run["next_obs"][..., -1])
    assert newest.mean() < 1.5, newest.mean()
    # An object drawn where the other frame has none (> 40 gray levels apart): seen in 3 of 100,000 pixels
    # (object edges); ALE's max-pool of the last two frames (an object at two positions) makes it 50.
    assert (newest > 40).mean() < 1e-4, (newest > 40).mean()


@needs_ale
def test_ale_sticky_actions_are_seeded_and_in_effect():
    """Sticky actions 0.25 (ALE/Pong-v5's): one seed gives one run, another seed another, and the run differs
    from sticky 0 under the same script; point rates match the python path's (conditional binomial test)."""
    a, b = play("ale", steps=300, seed=1), play("ale", steps=300, seed=1)
    for key in ("act_on", "rewards", "done"):
        np.testing.assert_array_equal(a[key], b[key])
    c = play("ale", steps=300, seed=2)
    assert not np.array_equal(a["act_on"], c["act_on"])
    d = play("ale", steps=300, seed=1, repeat_action_probability=0.0)
    assert not np.array_equal(a["act_on"], d["act_on"])
    check_stacks(a)
    py = play("python", steps=300, seed=1)
    points = np.count_nonzero(a["rewards"]), np.count_nonzero(py["rewards"])
    assert min(points) >= 5 and poisson_p(*points) > 0.001, points


@needs_envpool
def test_envpool_against_the_python_path(python_run):
    """EnvPool: the same first frames (bilinear both), the same episode ends (by the time limit) and point
    rates; its game drifts from ale-py's, so rewards are compared as rates (conditional binomial test)."""
    native = play("envpool", repeat_action_probability=0.0)
    check_stacks(native)
    first = np.abs(native["act_on"][0].astype(np.int16) - python_run["act_on"][0]).mean()
    assert first < 0.5, first                                                     # seen: 0.01
    early = np.abs(native["act_on"][:50].astype(np.int16) - python_run["act_on"][:50]).mean()
    assert early < 1.0, early
    for key in ("terminated", "truncated", "done"):
        np.testing.assert_array_equal(native[key], python_run[key], err_msg=key)
    points = np.count_nonzero(native["rewards"]), np.count_nonzero(python_run["rewards"])
    assert poisson_p(*points) > 0.001, points


@needs_ale
def test_worker_runs_on_the_native_env_the_config_names(fake_agent_cls, policies):
    """``VectorEnvWorker.for_agent`` routes ``env.vectorizer`` (and its greedy evaluation too)."""
    from harness.spaces import from_gymnasium
    from reference_agents.workers import VectorEnvWorker

    env = EnvConfig(id=PONG, atari=True, num_envs=2, vectorizer="ale")
    probe = make_vector_env(PONG, 1, {"atari": True, "vectorizer": "ale"})
    agent = fake_agent_cls(from_gymnasium(probe.observation_space), 6, greedy=policies[0])
    probe.close()
    agent.config, agent.seed = SimpleNamespace(env=env), 3
    worker = VectorEnvWorker.for_agent(agent, observe=False, update=False, n_step=1, gamma=0.9)
    assert isinstance(worker.envs, NativeAtariVectorEnv) and worker.envs.vectorizer == "ale"
    assert worker.run(num_steps=40).frames == 160
    assert agent.acted[-1][0].shape == (2, 84, 84, 4) and agent.acted[-1][0].dtype == np.uint8
    assert len(worker.evaluate(1, max_steps=5)) == 0


def test_unknown_vectorizer_names_the_key_and_the_allowed_values():
    assert get_args(EnvConfig.model_fields["vectorizer"].annotation) == VECTORIZERS
    with pytest.raises(ConfigError, match=r"env\.vectorizer: Input should be 'python', 'ale' or 'envpool' "
                                          r"\(got 'cpp'\)"):
        load_agent_config({"env": {"id": PONG, "atari": True, "vectorizer": "cpp"}},
                          model=_EnvOnly)
    with pytest.raises(ValueError, match=r"env\.vectorizer: expected one of python, ale, envpool; got 'cpp'"):
        make_vector_env(PONG, 1, {"atari": True, "vectorizer": "cpp"})


def test_native_vectorizer_needs_atari_and_an_ale_id():
    with pytest.raises(ConfigError, match=r"env: vectorizer 'ale' .* needs atari: true"):
        load_agent_config({"env": {"id": "CartPole-v1", "vectorizer": "ale"}}, model=_EnvOnly)
    with pytest.raises(ValueError, match=r"env\.vectorizer 'envpool' .* needs env\.atari: true"):
        make_vector_env(PONG, 1, {"vectorizer": "envpool"})
    with pytest.raises(ValueError, match=r"env\.vectorizer 'ale' needs an ALE environment id .*'CartPole-v1' is "
                                         r"made by gymnasium"):
        make_vector_env("CartPole-v1", 1, {"atari": True, "vectorizer": "ale"})
    with pytest.raises(ValueError, match=r"env\.kwargs \['mode'\] have no native counterpart"):
        make_vector_env(PONG, 1, {"atari": True, "vectorizer": "ale", "mode": 1})


def test_spacegraph_train_check_names_env_vectorizer():
    from spacegraph.train.common import check_env_config

    config = SimpleNamespace(env=EnvConfig(id=PONG, atari=True, vectorizer="ale",
                                           kwargs={"frameskip": (2, 5)}))
    with pytest.raises(ConfigError, match=r"my\.yaml: .*\n  env\.vectorizer: env\.vectorizer 'ale': env\.kwargs "
                                          r"frameskip must be a positive int"):
        check_env_config(config, "my.yaml")


@needs_ale
@pytest.mark.parametrize("vectorizer", ["python", "ale"])
def test_measure_env_stepping_counts_every_frame(vectorizer):
    from spacegraph.reports.env_stepping import measure_env_stepping

    out = measure_env_stepping({"id": PONG, "atari": True, "vectorizer": vectorizer}, num_envs=2, steps=5)
    assert out["vectorizer"] == vectorizer and out["frames"] == 2 * 5 * 4
    assert out["frames_per_cpu_s"] == pytest.approx(out["frames"] / out["cpu_s"])
    assert out["frames_per_s"] == pytest.approx(out["frames"] / out["wall_s"])
    with pytest.raises(ValueError, match="measure_env_stepping: steps must be a positive int; got 0"):
        measure_env_stepping({"id": PONG, "atari": True}, num_envs=2, steps=0)


def test_central_inference_actors_get_the_vectorizer():
    """A central-inference actor's ``env`` (as the learner sends it, checked by `check_env_actor_args`) keeps
    ``vectorizer`` on its way to `make_vector_env`."""
    from reference_agents.agents.impala.central_inference import check_env_actor_args
    from reference_agents.workers.native_envs import env_kwargs_of

    env, seed = check_env_actor_args([{"id": PONG, "num_envs": 2, "kwargs": {}, "atari": True,
                                       "vectorizer": "ale"}, 4])
    assert seed == 4 and env_kwargs_of(env) == {"atari": True, "vectorizer": "ale"}
    assert env_kwargs_of({"id": PONG, "atari": True, "vectorizer": "python"}) == {"atari": True}


@needs_ale
def test_central_inference_actor_steps_the_native_env(monkeypatch):
    """`env_actor` (a central-inference actor's body) makes its environments with `make_vector_env` from its
    ``env`` section, vectorizer included: its first request carries the native env's first observation."""
    from harness.execution.transport import QueueClosed
    from reference_agents.agents.impala import central_inference

    made, sent = [], []
    real = central_inference.make_vector_env
    monkeypatch.setattr(central_inference, "make_vector_env", lambda *a: made.append(a) or real(*a))

    class Requests:
        def put(self, record):
            sent.append(record)
            raise QueueClosed("the learner stopped")

    transport = SimpleNamespace(queues={"requests": Requests(), "actions-0": None})
    central_inference.env_actor(transport, 0, 0, {"id": PONG, "num_envs": 2, "kwargs": {}, "atari": True,
                                                  "vectorizer": "ale"}, 7)
    assert made == [(PONG, 2, {"atari": True, "vectorizer": "ale"})]
    assert sent[0]["obs"].shape == (2, 84, 84, 4) and sent[0]["obs"].dtype == np.uint8
