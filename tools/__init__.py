"""Operator and auditor tools: benchmarks (bench/) and the standalone log verifier (audit/)."""
