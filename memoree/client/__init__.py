"""The client room: the standard-library-only path of ``memoree call``.

Owns ``call`` (one JSON request on stdin, one envelope on stdout), the daemon client
(``transport``: endpoints, one framed exchange, auto-start), client-side ambient context
resolution (``context``) and where memoree keeps its files (``paths``). Nothing here imports a
third-party package until the request needs the store in-process.
"""
