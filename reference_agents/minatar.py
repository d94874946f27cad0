"""MinAtar games (Young & Tian, 2019) as gymnasium environments whose observations agents take.

The ``minatar`` package (the optional extra ``pip install '.[minatar]'``) ships a gymnasium class but
registers no ids on import and observes ``bool[10,10,C]``, a space no preprocessor takes. `register`
registers the package's ids, ``MinAtar/<Game>-v0`` (all 6 actions, as the paper's results) and
``MinAtar/<Game>-v1`` (each game's minimal action set), made by `make_minatar`: the package's env with its
observations as ``uint8[10,10,C]`` in ``{0, 1}`` (a config then casts them in the graph with
``preprocessing: [{type: normalize, low: 0, high: 1}]``). `reference_agents.environments.make_env` calls
`register` when it meets an unknown ``MinAtar/`` id, so configs name the ids directly::

    env: {id: MinAtar/Breakout-v0}

The games keep the package's defaults, which are the paper's settings: sticky actions with probability
0.1, difficulty ramping, one frame per step, no time limit (Freeway ends itself after 2500 frames).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

#: The games of the package, by the names its ``Environment`` takes, and the title their ids use.
GAMES = {"asterix": "Asterix", "breakout": "Breakout", "freeway": "Freeway", "seaquest": "Seaquest",
         "space_invaders": "SpaceInvaders"}
#: The exact pin of the ``minatar`` extra (pyproject.toml), named in the messages below.
INSTALL_HINT = "minatar extra not installed: pip install '.[minatar]'"
ID_PREFIX = "MinAtar/"


def missing() -> str | None:
    """None when the ``minatar`` package imports, else `INSTALL_HINT` (a skip reason for tests)."""
    try:
        import minatar.gym  # noqa: F401 - probing the import
    except ImportError:
        return INSTALL_HINT
    return None


def env_ids() -> list[str]:
    """Every id `register` registers: ``MinAtar/<Game>-v0`` and ``-v1`` per game."""
    return [f"{ID_PREFIX}{title}-v{v}" for title in GAMES.values() for v in (0, 1)]


class UInt8Observations(gymnasium.ObservationWrapper):
    """A MinAtar env with ``uint8[10,10,C]`` observations in ``{0, 1}`` instead of ``bool``.

    Args:
        env: the package's gymnasium env (``minatar.gym.BaseEnv``).
    """

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Box(0, 1, env.observation_space.shape, np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Resets the game; a seed of 2**32 or more (Ape-X workers derive such seeds; the package takes 32 bits) is
        first mapped into it by `numpy.random.SeedSequence`."""
        if seed is not None and seed >= 2 ** 32:
            seed = int(np.random.SeedSequence(seed).generate_state(1)[0])
        return super().reset(seed=seed, options=options)

    def observation(self, observation: Any) -> np.ndarray:
        """The observation as uint8 0/1."""
        return np.asarray(observation, np.uint8)


def make_minatar(game: str, use_minimal_action_set: bool = False, **kwargs: Any) -> Any:
    """The gymnasium env of one MinAtar game, observing ``uint8[10,10,C]`` (the entry point `register` gives).

    Args:
        game: a key of `GAMES`.
        use_minimal_action_set: the game's minimal actions (the ``-v1`` ids) instead of all 6 (``-v0``).
        **kwargs: passed to the package's env (``sticky_action_prob``, ``difficulty_ramping``, ``render_mode``).

    Raises:
        ValueError: for a game not in `GAMES`, or the extra not installed (`INSTALL_HINT`).
    """
    if game not in GAMES:
        raise ValueError(f"make_minatar: game must be one of {sorted(GAMES)}; got {game!r}")
    try:
        from minatar.gym import BaseEnv
    except ImportError:
        raise ValueError(f"make_minatar: {INSTALL_HINT}") from None
    return UInt8Observations(BaseEnv(game, use_minimal_action_set=use_minimal_action_set, **kwargs))


def register() -> bool:
    """Registers `env_ids` with gymnasium (ids already registered are left as they are).

    Returns:
        False when the ``minatar`` package is not installed (nothing registered), else True.
    """
    if missing() is not None:
        return False
    for game, title in GAMES.items():
        for version, minimal in ((0, False), (1, True)):
            env_id = f"{ID_PREFIX}{title}-v{version}"
            if env_id not in gymnasium.registry:
                gymnasium.register(id=env_id, entry_point="reference_agents.minatar:make_minatar",
                                   kwargs={"game": game, "use_minimal_action_set": minimal})
    return True
