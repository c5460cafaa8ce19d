"""The admin room: operator work on a whole store.

Owns end-to-end verification (``verify``), backups and restores (``backup``), the auditor
export and disaster-recovery import (``transfer``) and the retrieval evaluator
(``evaluation``). Sealing and proofs belong to the log itself (``memoree.eventlog.sealing``).
"""
