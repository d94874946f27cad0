"""A layer preset of `NeuralNetwork` is what its spec builds: the spec writes the preset out.

``nn_network_nature_dqn.yaml`` lists the layers of `nature_dqn_layers` by hand, so its checks test
the preset only while the two agree (``suites/library/test_nn.py`` checks the same, outside this suite).
"""

from __future__ import annotations

from pathlib import Path

from harness.specs import load_spec
from reference_agents.components.nn.network import nature_dqn_layers

#: a mutant of this module runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.nn.network",)

SPECS = Path(__file__).resolve().parents[2] / "specs" / "components"


def test_nature_dqn_layers_are_the_ones_its_spec_builds() -> None:
    assert nature_dqn_layers() == load_spec(SPECS / "nn_network_nature_dqn.yaml").spec.config["layers"]
    assert nature_dqn_layers() is not nature_dqn_layers()  # a fresh list each call
