"""spacegraph's harness: spaces, component graphs, backends, executors and test tooling."""

__version__ = "0.1.0"
