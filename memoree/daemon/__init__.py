"""The daemon room: one process that owns a store and answers framed requests on a socket.

Owns the daemon itself, its admission rules and the single writer (``server``), the I/O loop
that reads frames and writes answers within deadlines and caps (``listener``), the reader pool
that hands reads to reader processes (``readpool``), the reader process itself (``reader``), and
hosting the emem REST app on a thread of the same process (``rest_host``).
"""
