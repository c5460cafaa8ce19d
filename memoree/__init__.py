"""memoree: a local, event-sourced memory service for AI agents.

The front door: the protocol envelope and op registry (``protocol``, ``ops``), the service that
dispatches requests to commands and queries (``service``), client-side context resolution
(``context``), and the ``memoree`` command line (``entry``, ``cli``). Heavy modules are imported
lazily so ``memoree call`` starts fast.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
