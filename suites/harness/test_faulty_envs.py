"""`CrashingCartPole`: exactly one of the environments sharing a marker raises, once, after its steps."""

import gymnasium
import pytest

from harness.testing.faulty_envs import CRASH_MESSAGE

ID = "harness.testing.faulty_envs:CrashingCartPole-v1"


def _steps(env, n):
    env.reset(seed=0)
    for _ in range(n):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()


def test_one_of_the_envs_sharing_a_marker_raises_once(tmp_path):
    marker = tmp_path / "crashed"
    first, second = (gymnasium.make(ID, crash_after=5, marker=str(marker)) for _ in range(2))
    _steps(first, 4)
    assert not marker.exists()
    with pytest.raises(RuntimeError, match=CRASH_MESSAGE):
        _steps(first, 1)
    assert marker.exists()
    _steps(second, 50)                  # the marker is there: the other env runs on
    _steps(gymnasium.make(ID, crash_after=1, marker=str(marker)), 50)   # and so does a restarted worker's


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="crash_after must be a positive int; got 0"):
        gymnasium.make(ID, crash_after=0, marker=str(tmp_path / "m"))
    with pytest.raises(ValueError, match="marker must be a file path in an existing folder"):
        gymnasium.make(ID, crash_after=3, marker=str(tmp_path / "no" / "such" / "m"))
