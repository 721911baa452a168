"""Benchmark scripts; results are recorded in BENCHMARKS.md."""
