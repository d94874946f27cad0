"""The top layer: the `spacegraph` command, the demo and the report scenarios that measure the
reference agents against RLlib. It imports `harness` and `reference_agents`; nothing imports it."""
