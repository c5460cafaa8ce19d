"""The standalone auditor verifier (verify_log.py imports nothing from memoree)."""
