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


def test_a_layer_given_by_its_class_path_is_built_as_by_its_type_name() -> None:
    from reference_agents.components.common import Dense
    from reference_agents.components.nn import NeuralNetwork

    by_path = NeuralNetwork([{"type": "reference_agents.components.common.Dense", "units": 3, "activation": "tanh"}])
    by_name = NeuralNetwork([{"type": "dense", "units": 3, "activation": "tanh"}])
    (a,), (b,) = by_path.layers, by_name.layers
    assert type(a) is type(b) is Dense and (a.units, a.activation) == (b.units, b.activation) == (3, "tanh")


def test_impala_resnet_layers_are_the_ones_its_spec_builds() -> None:
    """``nn_network_impala_resnet.yaml`` writes out ``impala_resnet_layers(channels=(4,), blocks=2, units=8)``."""
    from reference_agents.components.nn.network import impala_resnet_layers

    layers = impala_resnet_layers(channels=(4,), blocks=2, units=8)
    assert layers == load_spec(SPECS / "nn_network_impala_resnet.yaml").spec.config["layers"]
    assert impala_resnet_layers() is not impala_resnet_layers()  # a fresh list each call


def test_the_default_impala_resnet_has_the_documented_size() -> None:
    """The docstring: on [B,84,84,4] frames the sections give [B,11,11,32] and the defaults hold 1,089,232
    parameters, 991,488 of them in the dense layer (counted from the layer configs: 3x3 kernels and biases;
    'same' pooling of stride 2 halves rounding up). Written after seeing the seed-3011 mutation survivors."""
    import math

    from reference_agents.components.nn.network import impala_resnet_layers

    size, channels, total, dense = 84, 4, 0, 0
    for layer in impala_resnet_layers():
        kind = layer["type"]
        if kind == "conv2d":
            total += 9 * channels * layer["filters"] + layer["filters"]
            channels = layer["filters"]
        elif kind == "max_pool2d":
            size = math.ceil(size / layer["strides"])
        elif kind == "residual_block":
            total += 2 * (9 * channels * channels + channels)
        elif kind == "dense":
            dense = size * size * channels * layer["units"] + layer["units"]
            total += dense
    assert (size, channels) == (11, 32)
    assert (total, dense) == (1_089_232, 991_488)
