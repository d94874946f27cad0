"""The reference learning runs against their published targets (marker ``learning-long``: hours each, run only
when -m names it, never in .ci/run; docs/testing.md).

Each test is one reference run of `spacegraph.reports.learning_long` (MinAtar DQN on both backends and Ape-X with
Ray and 2 workers on Breakout, SpaceInvaders and Freeway: the last-100 training mean at least Young & Tian 2019's
DQN return at the frame budget; IMPALA on Pong: 18 within 10M frames and 90 minutes; Ape-X on Pong with Ray and
2 workers: 18 within 120 minutes), on seeds 0, 1, 2 one after
another until 2 of them reach the target or too few are left (`harness.specs.agents.SeedCriterion`, as the short
learning tests). Environment variables: ``LEARNING_LONG_MINATAR_FRAMES`` a shorter MinAtar budget (1M-5M; the
target is the published curve at that point); ``LEARNING_LONG_RESULT`` a result file every run is added to (draw
it with ``spacegraph report --from-json PATH --only learning_long``).
"""

from __future__ import annotations

import os

import pytest

from harness.specs.agents import SeedCriterion
from reference_agents import minatar
from spacegraph.reports.learning_long import add_record, load_result, run_line, run_reference
from spacegraph.reports.learning_long_runs import MINATAR_TARGETS, reference_runs

pytestmark = getattr(pytest.mark, "learning-long")

RUNS = {r.name: r for r in reference_runs(frames=int(os.environ.get("LEARNING_LONG_MINATAR_FRAMES", 5_000_000)))}
NAMES = [*(f"dqn_minatar_{game}_{backend}" for game in MINATAR_TARGETS for backend in ("torch", "tf")),
         *(f"apex_minatar_{game}" for game in MINATAR_TARGETS), "impala_pong", "apex_pong"]
SEEDS = SeedCriterion(seeds=(0, 1, 2), required=2)


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_run_reaches_its_published_target(name, record_property):
    run = RUNS[name]
    if run.env_id and run.env_id.startswith("MinAtar/") and minatar.missing():
        pytest.skip(minatar.missing())
    path = os.environ.get("LEARNING_LONG_RESULT")
    result = load_result(path) if path else {}

    def trial(seed: int) -> dict:
        record = run_reference(run, seed)
        add_record(result, run, record, path)
        return record

    verdict = SEEDS.run(trial, solved=lambda record: record["reached"])
    record_property("learning", "; ".join(run_line(r) for _, r, _ in verdict.runs))
    assert verdict.passed, SEEDS.explain(verdict, f"{name} (target {run.stop.target_return:g}: {run.target_source})",
                                         run_line)
