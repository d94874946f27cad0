"""The one derivation of every seed a run uses from its run seed (docs/reproducibility.md).

A run has one seed ``S`` (the config's ``seed``, or ``spacegraph train --seed``). Everything random in the run
draws from a seed that `derive_seed` computes from ``S`` (or from a worker's own seed ``W``, itself derived from
``S``), by role:

- ``agent`` = ``S``: the agent or learner (initial weights, its random ops such as exploration and
  sampling, its replay); a one-process run's `VectorEnvWorker` has ``W = S``.
- ``env`` *i* = ``W + i``: environment *i* of a worker's vector env (its first reset).
- ``reset`` *r* = ``W + 1_000_003 * r``: the *r*-th restart of a worker's environments (a resumed run; then
  ``env`` *i* on top).
- ``eval_screen`` = ``W + 10_000`` and ``eval_full`` = ``W + 50_000``: the evaluation's environments.
- ``actor`` *a*, *k* = ``mix(S, 1, a, k)``: IMPALA actor *a* in its *k*-th incarnation (actor-learner: its
  agent and environments; central inference: its environments).
- ``apex_worker`` *w*, *k* = ``mix(S, 2, w, k)``: Ape-X worker *w*: its agent (``k = 0``) and its environments
  in incarnation *k*.
- ``shard`` *j* = ``mix(S, 3, j, 0)``: Ape-X replay shard *j*'s sampling generator.

The one-process roles keep the offsets they always had (the learning tests' seeds were measured with them).
The roles of distributed runs are hashed: ``mix(S, code, index, incarnation)`` is the first 64-bit word of
NumPy's ``SeedSequence(S, spawn_key=(code, index, incarnation))`` folded into ``[2**32, 2**62)``. So for any
``S < 2**31`` a distributed role never meets a one-process role (those stay below ``2**32`` for fewer than
2,000 restarts), and two
distributed roles (or their environments ``+ i``) meet only by a 64-bit hash collision;
``suites/reproducibility/test_seeds.py`` checks a sensible range exhaustively. A value below ``2**62`` leaves
room for ``+ i`` and still fits TensorFlow's int64 seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The roles whose seed is an offset of the run's (or a worker's) seed: ``role -> (multiplier of index, offset)``.
OFFSET_ROLES: dict[str, tuple[int, int]] = {
    "agent": (0, 0),
    "env": (1, 0),
    "reset": (1_000_003, 0),
    "eval_screen": (0, 10_000),
    "eval_full": (0, 50_000),
}
#: The roles of distributed runs, hashed with these (fixed, never reused) codes.
HASHED_ROLES: dict[str, int] = {"actor": 1, "apex_worker": 2, "shard": 3}
#: Every role `derive_seed` knows.
ROLES: tuple[str, ...] = (*OFFSET_ROLES, *HASHED_ROLES)
#: Hashed seeds lie in ``[HASHED_LOW, HASHED_HIGH)``.
HASHED_LOW, HASHED_HIGH = 2 ** 32, 2 ** 62


def _check_int(name: str, value: Any, role: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"derive_seed({role!r}): {name} must be a non-negative int; got {value!r}")
    return int(value)


def derive_seed(seed: int, role: str, index: int = 0, incarnation: int = 0) -> int:
    """The seed of ``role`` (number ``index``, restarted ``incarnation`` times) in a run seeded ``seed``.

    See the module docstring for the table of roles. ``seed`` is the run seed for the run-level roles and a
    worker's own seed for ``env``, ``reset``, ``eval_screen`` and ``eval_full``.

    Args:
        seed: the run seed (or a worker's seed), a non-negative int.
        role: one of `ROLES`.
        index: the environment, restart, actor, worker or shard number (0 for ``agent`` and the evaluations).
        incarnation: how often the actor or worker was restarted (``actor`` and ``apex_worker`` only).

    Returns:
        A non-negative int (below ``2**63`` for ``seed`` below ``2**62``).

    Raises:
        ValueError: for an unknown role, a negative or non-int argument, or an ``index`` / ``incarnation``
            that the role does not take.
    """
    if role not in ROLES:
        raise ValueError(f"derive_seed: unknown role {role!r}; expected one of {', '.join(ROLES)}")
    seed, index, incarnation = (_check_int(n, v, role) for n, v in
                                (("seed", seed), ("index", index), ("incarnation", incarnation)))
    if incarnation and role not in ("actor", "apex_worker"):
        raise ValueError(f"derive_seed({role!r}): only 'actor' and 'apex_worker' have incarnations; "
                         f"got incarnation={incarnation}")
    if role in OFFSET_ROLES:
        multiplier, offset = OFFSET_ROLES[role]
        if index and not multiplier:
            raise ValueError(f"derive_seed({role!r}): the role has no index; got index={index}")
        return seed + multiplier * index + offset
    sequence = np.random.SeedSequence(seed, spawn_key=(HASHED_ROLES[role], index, incarnation))
    word = int(sequence.generate_state(1, np.uint64)[0])
    return HASHED_LOW + word % (HASHED_HIGH - HASHED_LOW)


__all__ = ["HASHED_HIGH", "HASHED_LOW", "HASHED_ROLES", "OFFSET_ROLES", "ROLES", "derive_seed"]
