"""What an actor started elsewhere accepts from the learner as `env_actor`'s arguments: an env section checked
as a local config's is, and a seed; a ``module:Name`` id (which gymnasium would import) is refused."""

from __future__ import annotations

import pytest

from reference_agents.agents.impala.central_inference import REMOTE_BODIES, check_env_actor_args, env_actor


def test_a_valid_env_section_and_seed_pass_with_the_config_defaults():
    env, seed = check_env_actor_args([{"id": "CartPole-v1", "num_envs": 2}, 3])
    assert env == {"id": "CartPole-v1", "num_envs": 2, "kwargs": {}, "atari": False, "vectorizer": "python"}
    assert seed == 3
    assert REMOTE_BODIES["central-inference"].run is env_actor


@pytest.mark.parametrize("args, message", [
    ({"id": "CartPole-v1"}, "expected [env, seed]"),
    ([{"id": "CartPole-v1"}], "expected [env, seed]"),
    ([{"id": "CartPole-v1"}, True], "seed must be an int"),
    ([{"id": "CartPole-v1"}, -1], "seed must be an int in [0, 2**63)"),
    (["reference_agents/configs/impala_cartpole.yaml", 0], "the env section must be a mapping"),
    ([{"id": "CartPole-v1", "num_envs": 0}, 0], "num_envs"),
    ([{"id": "CartPole-v1", "num_envs": "2; rm"}, 0], "num_envs"),
    ([{"id": "CartPole-v1", "atari": "maybe"}, 0], "atari"),
    ([{"id": "CartPole-v1", "entry_point": "os:system"}, 0], "entry_point"),
    ([{"id": "os:CartPole-v1"}, 0], "has the module:Name form, which makes gymnasium import the module"),
])
def test_arguments_from_the_wire_are_refused_with_what_is_wrong(args, message):
    with pytest.raises(ValueError) as info:
        check_env_actor_args(args)
    assert message in str(info.value)
