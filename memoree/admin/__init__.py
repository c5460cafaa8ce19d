"""Operator tools: verify, backup, export/import, evaluation."""
