"""Atari frame processing env-side (`AtariFrames`) and the spaces of the environment an agent config names.

Environments are made by `make_env`; `frames_per_step` counts the emulator frames of one step.

``env: {id: ALE/Pong-v5, atari: true}`` gives observations ``uint8[84,84,4]``:
the ALE v5 env skips 4 frames per step itself (``frameskip=4``, sticky actions
0.25) and returns gray frames (``obs_type="grayscale"``); `AtariFrames` resizes
each to 84x84 and stacks the last 4 on the channel axis, oldest first. The stack
lives env-side because replay stores observations: a transition's state and
next state must each carry their own 4 frames.
"""

from __future__ import annotations

import difflib
import importlib
import warnings
from typing import Any

import numpy as np

ATARI_FRAMES = 4
ATARI_SIZE = 84


class AtariFrames:
    """Gray ``size x size`` frames, the last ``frames`` of them stacked channel-last, as uint8.

    Wraps an ALE env made with ``obs_type="grayscale"`` (``uint8[210,160]``
    frames). Each frame is resized bilinearly by two matrix products (the same
    `bilinear_matrix` the in-graph `ImageResize` uses) and rounded. After a reset
    the first frame fills the whole stack. Implemented in NumPy (no OpenCV).
    """

    def __init__(self, env: Any, frames: int = ATARI_FRAMES, size: int = ATARI_SIZE) -> None:
        import gymnasium as gym

        from reference_agents.components.preprocessors.resize import bilinear_matrix

        shape = env.observation_space.shape
        if len(shape) != 2 or env.observation_space.dtype != np.uint8:
            raise ValueError(f"AtariFrames: expected gray uint8 frames [H,W] (make the ALE env with "
                             f"obs_type='grayscale'); got {env.observation_space}")
        self.env = env
        self.frames = frames
        self.rows = bilinear_matrix(shape[0], size).astype(np.float32)      # [size, H]
        self.cols = bilinear_matrix(shape[1], size).astype(np.float32).T    # [W, size]
        self.stack = np.zeros((size, size, frames), np.uint8)
        self.observation_space = gym.spaces.Box(0, 255, (size, size, frames), np.uint8)
        self.action_space = env.action_space
        self.spec = env.spec
        self.unwrapped = env.unwrapped

    def _frame(self, raw: np.ndarray) -> np.ndarray:
        small = self.rows @ raw.astype(np.float32) @ self.cols
        return np.clip(np.rint(small), 0, 255).astype(np.uint8)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(**kwargs)
        self.stack[...] = self._frame(obs)[..., None]
        return self.stack.copy(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.stack[..., :-1] = self.stack[..., 1:]
        self.stack[..., -1] = self._frame(obs)
        return self.stack.copy(), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()


def env_spaces(env_id: str, atari: bool = False, **kwargs: Any) -> tuple[Any, Any]:
    """``(observation space, action space)`` of the environment as spacegraph spaces (no batch rank)."""
    from harness.spaces import from_gymnasium

    env = make_env(env_id, atari=atari, **kwargs)
    try:
        return from_gymnasium(env.observation_space), from_gymnasium(env.action_space)
    finally:
        env.close()


# Attributes through which a wrapper layer (or the unwrapped env) repeats one action over
# several emulator frames: ale_py's AtariEnv (`_frameskip`), gymnasium's AtariPreprocessing
# (`frame_skip`) and MaxAndSkipObservation (`_skip`).
_SKIP_ATTRIBUTES = ("_frameskip", "frame_skip", "_skip")


def _registry() -> dict[str, Any]:
    import gymnasium

    return gymnasium.registry


def _register_ale() -> bool:
    """Registers ale-py's Atari ids with gymnasium; False when ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    import gymnasium

    gymnasium.register_envs(ale_py)
    return True


def _register_minatar() -> str | None:
    """Registers the MinAtar ids (`reference_agents.minatar.register`); without the minatar extra, the
    install hint instead."""
    from reference_agents import minatar

    return None if minatar.register() else minatar.INSTALL_HINT


def make_env(env_id: str, atari: bool = False, **kwargs: Any) -> Any:
    """A gymnasium environment for a registered id (classic control, Box2D, ALE, ...).

    ALE ids (``"ALE/Pong-v5"``, ``"PongNoFrameskip-v4"``) are registered from
    ale-py on first use, so callers need not import it; so are MinAtar ids (``"MinAtar/Breakout-v0"``,
    `reference_agents.minatar`) from the ``minatar`` extra. ``"module:Id"`` imports ``module``
    first (which registers ``Id``), as ``gymnasium.make`` does: a user's environment then
    makes in any process, a Ray actor's or a TF task's included.

    Args:
        env_id: a gymnasium id, or ``"module:Id"``.
        atari: Atari frame processing env-side, as an agent config's ``env.atari`` asks: gray
            frames (``obs_type="grayscale"``) resized to 84x84 and the last 4 stacked
            (`reference_agents.environments.AtariFrames`), ``uint8[84,84,4]``.
        **kwargs: passed to ``gymnasium.make`` (e.g. ``max_episode_steps``, ``frameskip``).

    Returns:
        The environment ``gymnasium.make`` returns (wrapped in ``AtariFrames`` with ``atari``).

    Raises:
        ValueError: if ``env_id`` is not a string or not registered (naming it and listing
            close matches; a MinAtar id without the extra says how to install it), or if the
            environment rejects ``kwargs`` (naming them).
    """
    import gymnasium

    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"make_env: env_id must be a non-empty gymnasium id string; got {env_id!r}")
    if ":" in env_id:   # "module:Id": the module registers Id when imported (in every process that makes it)
        module, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"make_env: {module}:{env_id} names the module {module!r}, which does not import: "
                             f"{exc}") from None
    registry = _registry()
    if env_id not in registry:
        ale = _register_ale()
        if env_id.startswith("MinAtar/") and (hint := _register_minatar()):
            raise ValueError(f"make_env: {env_id!r} is a MinAtar game; {hint}")
        if env_id not in registry:
            close = difflib.get_close_matches(env_id, list(registry), n=5, cutoff=0.6)
            hint = f"; close matches: {close}" if close else ""
            if not ale and (env_id.startswith("ALE/") or "NoFrameskip" in env_id):
                hint += " (ale-py is not installed, so no Atari ids are registered)"
            raise ValueError(f"make_env: unknown environment id {env_id!r}{hint}")
    if not isinstance(atari, bool):
        raise ValueError(f"make_env: atari must be a bool; got {atari!r}")
    if atari:
        entry = str(registry[env_id].entry_point)
        if "ale_py" not in entry:
            raise ValueError(f"make_env: atari=True needs an ALE environment; {env_id!r} is made by {entry}")
        kwargs.setdefault("obs_type", "grayscale")
    try:
        with warnings.catch_warnings():
            # gymnasium calls MinAtar/<Game>-v0 (all 6 actions: the published results') out of date beside -v1
            warnings.filterwarnings("ignore", r".*MinAtar/\S+-v0 is out of date", DeprecationWarning)
            env = gymnasium.make(env_id, **kwargs)
    except TypeError as exc:
        raise ValueError(f"make_env: environment {env_id!r} rejected the keyword arguments "
                         f"{sorted(kwargs)}: {exc}") from exc
    if atari:
        try:
            env = AtariFrames(env)
        except ValueError as exc:
            raise ValueError(f"make_env: atari=True for {env_id!r} with {kwargs}: {exc}") from exc
    return env


def frames_per_step(env: Any) -> float:
    """The emulator frames one ``env.step`` advances.

    The product of the frame skips of every wrapper layer and of the unwrapped
    environment: ALE's ``frameskip`` (4 for ``ALE/*-v5``, 1 for ``*NoFrameskip-v4``),
    gymnasium's ``AtariPreprocessing(frame_skip=k)`` and ``MaxAndSkipObservation(skip=k)``.
    Environments without frames (classic control) count 1. A stochastic ALE
    frameskip ``(low, high)`` (uniform in ``low..high-1``) counts its mean.

    Args:
        env: a gymnasium environment, wrapped or not.

    Returns:
        Frames per step (an int-valued float unless the frameskip is stochastic).

    Raises:
        ValueError: if a layer's frame skip is not a positive int or a ``(low, high)`` pair.
    """
    frames = 1.0
    layer = env
    seen: set[int] = set()
    while layer is not None and id(layer) not in seen:
        seen.add(id(layer))
        own = vars(layer) if hasattr(layer, "__dict__") else {}
        for name in _SKIP_ATTRIBUTES:
            if name in own:
                frames *= _skip_value(type(layer).__name__, name, own[name])
        layer = own.get("env")
    return frames


def _skip_value(owner: str, name: str, value: Any) -> float:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return float(value)
    if (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
            and 0 < value[0] < value[1]):
        return (value[0] + value[1] - 1) / 2.0
    raise ValueError(f"frames_per_step: {owner}.{name} must be a positive int or a (low, high) pair; "
                     f"got {value!r}")
