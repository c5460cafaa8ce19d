"""The client room: the standard-library-only path of ``memoree call``.

Owns ``call`` (one JSON request on stdin, one envelope on stdout), the daemon client
(``transport``: endpoints, one framed exchange, auto-start), client-side ambient context
resolution (``context``), where memoree keeps its files and who may own them (``paths``), and the
store's secret that TCP and HTTP clients present (``secret``). Nothing here imports a
third-party package until the request needs the store in-process.
"""
