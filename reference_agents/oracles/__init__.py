"""NumPy oracles and stateful models for the component specs, and the fixture roots some specs build."""
