"""Sample pipelines shipped with Shoal (the demo, tests and benchmarks run them)."""
