"""`harness.seeds.derive_seed`: the one seed derivation (docs/reproducibility.md).

The one-process roles keep the numbers the learning tests' seeds were measured with; no two roles of one run
meet within the ranges a run uses; and every place that seeds something derives it here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from harness.seeds import HASHED_HIGH, HASHED_LOW, HASHED_ROLES, ROLES, derive_seed

REPO = Path(__file__).resolve().parents[2]

#: The ranges the collision check covers: run seeds, actors / workers / shards, incarnations, environments per
#: worker, worker restarts and evaluation environments.
RUN_SEEDS, INDICES, INCARNATIONS, ENVS, RESETS, EVAL_ENVS = range(40), 128, 4, 64, 8, 100


def test_one_process_roles_keep_their_numbers():
    s = 7
    assert derive_seed(s, "agent") == 7
    assert [derive_seed(s, "env", i) for i in range(3)] == [7, 8, 9]
    assert derive_seed(s, "reset", 2) == 7 + 2 * 1_000_003
    assert derive_seed(s, "eval_screen") == 10_007
    assert derive_seed(s, "eval_full") == 50_007


def test_hashed_roles_are_fixed_numbers_in_their_range():
    # The values a distributed run of seed 0 gives its first actor, worker and shard: a change of the derivation
    # (the codes, the hash, the range) changes the episodes every distributed run plays, so it must be deliberate.
    assert [derive_seed(0, "actor", 0), derive_seed(0, "apex_worker", 0), derive_seed(0, "shard", 0),
            derive_seed(3, "actor", 1, 2)] == [54498462538074514, 1315215629197973899, 3093481651992113220,
                                               2493510770808007062]
    assert derive_seed(0, "actor", 0) == derive_seed(np.int64(0), "actor", np.int64(0))
    seen = {role: derive_seed(0, role, 1) for role in HASHED_ROLES}
    assert len(set(seen.values())) == len(seen)
    for role in HASHED_ROLES:
        for s in (0, 1, 2 ** 31 - 1, 2 ** 40):
            assert HASHED_LOW <= derive_seed(s, role, 3) < HASHED_HIGH
    assert derive_seed(5, "actor", 2, 1) != derive_seed(5, "actor", 2, 0) != derive_seed(5, "actor", 1, 0)
    assert derive_seed(5, "apex_worker", 2, 1) != derive_seed(5, "actor", 2, 1)


def windows(s: int) -> list[tuple[int, int, str]]:
    """``(first seed, count, who)`` of every seed window one run of seed ``s`` uses."""
    out = [(derive_seed(s, "agent"), ENVS, "agent and its envs"),
           (derive_seed(s, "eval_screen"), EVAL_ENVS, "evaluation screen"),
           (derive_seed(s, "eval_full"), EVAL_ENVS, "full evaluation")]
    out += [(derive_seed(s, "reset", r), ENVS, f"restart {r}") for r in range(1, RESETS)]
    for role in ("actor", "apex_worker"):
        out += [(derive_seed(s, role, i, k), ENVS, f"{role} {i} incarnation {k}")
                for i in range(INDICES) for k in range(INCARNATIONS)]
    out += [(derive_seed(s, "shard", j), 1, f"shard {j}") for j in range(INDICES)]
    return out


def test_no_two_roles_of_a_run_share_a_seed():
    # Each window is [first, first + count): a worker's environments (or an evaluation's) take consecutive seeds.
    for s in RUN_SEEDS:
        spans = sorted(windows(s))
        for (a, n, who), (b, _, other) in zip(spans, spans[1:]):
            assert a + n <= b, f"run seed {s}: {who} [{a}, {a + n}) overlaps {other} from {b}"


@pytest.mark.parametrize("args, message", [
    ((0, "learner"), "unknown role 'learner'; expected one of agent, env"),
    ((-1, "agent"), "seed must be a non-negative int; got -1"),
    ((1.5, "env", 1), "seed must be a non-negative int; got 1.5"),
    ((True, "agent"), "seed must be a non-negative int; got True"),
    ((0, "env", -2), "index must be a non-negative int; got -2"),
    ((0, "eval_screen", 1), "the role has no index; got index=1"),
    ((0, "shard", 1, 1), "only 'actor' and 'apex_worker' have incarnations; got incarnation=1"),
])
def test_bad_arguments_get_one_clear_error(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        derive_seed(*args)


def operand_name(node: ast.AST) -> str:
    """The name an operand reads: ``seed``, ``self.seed``, ``int(seed)`` -> ``seed``; otherwise ``""``."""
    if isinstance(node, ast.Call) and len(node.args) == 1:
        return operand_name(node.args[0])
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def seed_arithmetic(root: Path = REPO) -> list[str]:
    """``file:line`` of every ``<...seed> + x`` in harness and reference_agents outside `harness.seeds`."""
    found = []
    for package in ("harness", "reference_agents"):
        for path in sorted((root / package).rglob("*.py")):
            if path.name == "seeds.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
                        and operand_name(node.left).endswith("seed")):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_seed_is_derived_in_one_place():
    # harness.testing.parity seeds the second backend of a parity check with spec seed + 1 (a test's choice, not
    # a run's): the one exception.
    assert [f for f in seed_arithmetic() if not f.startswith("harness/testing/parity.py")] == []


def test_roles_are_documented():
    doc = (REPO / "docs" / "reproducibility.md").read_text(encoding="utf-8")
    import harness.seeds as module

    for role in ROLES:
        assert f"`{role}`" in doc and f"``{role}``" in module.__doc__, role


def test_a_negative_seed_is_refused_by_name():
    from reference_agents.workers import VectorEnv, VectorEnvWorker

    with pytest.raises(ValueError, match=r"VectorEnvWorker: seed must be >= 0 \(environments take non-negative "
                                         r"seeds\); got -1"):
        VectorEnvWorker(None, "CartPole-v1", seed=-1)
    envs = VectorEnv("CartPole-v1", 2)
    try:
        with pytest.raises(ValueError, match=r"VectorEnv.reset: seed must be >= 0 .*; got -3"):
            envs.reset(seed=-3)
    finally:
        envs.close()
