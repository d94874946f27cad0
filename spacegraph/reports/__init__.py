"""Report scenarios: our agents and components measured beside hand-written code and RLlib."""
