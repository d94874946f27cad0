"""Fixtures around the fake agent of `suites.doubles` (the DQN agent's worker-facing interface, recording calls)."""

from __future__ import annotations

import pytest

from harness.spaces import FloatBox, from_gymnasium
from suites.doubles import FakeAgent, greedy_policy, pseudo_random_policy


@pytest.fixture
def cartpole_agent():
    """A fake agent for CartPole-v1 (float32[4] observations, 2 actions)."""
    import gymnasium

    space = from_gymnasium(gymnasium.make("CartPole-v1").observation_space)
    assert isinstance(space, FloatBox)
    return lambda **kw: FakeAgent(space, 2, **kw)


@pytest.fixture
def fake_agent_cls():
    """The `FakeAgent` class, for agents over other spaces."""
    return FakeAgent


@pytest.fixture
def policies():
    """The fake agent's policies: ``(pseudo_random_policy, greedy_policy)``."""
    return pseudo_random_policy, greedy_policy
