"""The read side: every non-mutating op's answer, computed from the projections.

Owns exact reads and histories (``entities``), citations (``citations``), relation and conflict
lists (``relations``, ``conflicts``), lexical search and its analysis (``search``,
``analysis``), recall and the one-step recovery (``recall``, ``retrieve``, ``probe``),
``context.build`` (``context_build``), risk signals on untrusted text (``risk``) and the fact
plane's recall and receipt checks (``facts``). Reads run on their own connection and are bounded;
the records they share with the write side live in ``memoree.projections``. It imports the
projections, the event log and the kernel, never the write side.
"""
