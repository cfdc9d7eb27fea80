"""Shared helpers of the integration tests, the demo and the benchmarks."""
