"""The daemon room: one process that owns a store and answers framed requests on a socket.

Owns the listener, its connection threads and the single writer (``server``), and hosting the
emem REST app on a thread of the same process (``rest_host``).
"""
