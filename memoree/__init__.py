"""memoree: a local, event-sourced memory service for AI agents.

The front door, in rooms (one sub-package per responsibility): ``protocol`` (envelope, op
registry, framing), ``service`` (the service, the engine, readers, discovery), ``daemon``,
``client`` (the lean ``memoree call`` path), ``cli``, ``agents`` (MCP, remember, importers),
``admin`` (verify, backup, transfer, evaluation) and ``factplane`` (the signed fact plane).
The kernel modules at this root (``errors``, ``limits``, ``ids``, ``inputs``, ``log``,
``hosts``) import nothing above themselves, so every layer may use them. The layers below the
front door install as ``memoree.eventlog``, ``memoree.projections``, ``memoree.commands`` and
``memoree.queries``. Nothing is imported here, so ``memoree call`` starts fast.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
