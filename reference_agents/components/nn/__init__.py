"""Neural-network layers and networks: convolutions, pooling, residual blocks, flattening, layer stacks from
configs, dueling heads, LSTMs."""

from reference_agents.components.nn.conv2d import Conv2D
from reference_agents.components.nn.dueling import DuelingHead
from reference_agents.components.nn.flatten import Flatten
from reference_agents.components.nn.lstm import LSTM
from reference_agents.components.nn.network import NeuralNetwork, impala_resnet_layers, nature_dqn_layers
from reference_agents.components.nn.pooling import MaxPool2D
from reference_agents.components.nn.residual import ResidualBlock

__all__ = ["Conv2D", "Flatten", "MaxPool2D", "ResidualBlock", "NeuralNetwork", "nature_dqn_layers",
           "impala_resnet_layers", "DuelingHead", "LSTM"]
