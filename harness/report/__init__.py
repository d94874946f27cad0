"""Report runners: build profiles, throughput and learning reports."""
