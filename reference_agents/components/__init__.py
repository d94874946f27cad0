"""Components used by the reference agents."""
