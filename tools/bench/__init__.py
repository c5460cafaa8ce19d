"""Benchmarks: each prints our figure, a baseline measured in the same run, and the ratio."""
