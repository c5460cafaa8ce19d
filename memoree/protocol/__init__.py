"""The protocol room: what a request and a response are, with no I/O.

Owns the envelope (``envelope``: request/response shapes, fingerprint, key namespace), the op
registry (``ops``: each op's input type and class), which typed result each op returns
(``results``) and the length-prefixed frame format (``framing``). The typed inputs themselves
live in the kernel (``memoree.inputs``) because deciders and readers below the front door decode
into them; scope predicates live with the event's ``Scope`` (``memoree.eventlog.scope``).
Nothing is imported here, so ``memoree call`` pays only for the modules it names.
"""
