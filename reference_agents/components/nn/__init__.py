"""Neural-network layers and networks: convolutions, flattening, layer stacks from configs, dueling heads, LSTMs."""

from reference_agents.components.nn.conv2d import Conv2D
from reference_agents.components.nn.dueling import DuelingHead
from reference_agents.components.nn.flatten import Flatten
from reference_agents.components.nn.lstm import LSTM
from reference_agents.components.nn.network import NeuralNetwork, nature_dqn_layers

__all__ = ["Conv2D", "Flatten", "NeuralNetwork", "nature_dqn_layers", "DuelingHead", "LSTM"]
