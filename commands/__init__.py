"""The write side: one pure decider per mutating op, and the handler that does their I/O.

Owns the deciders (``artifacts``, ``claims``, ``purge``, ``relations``, ``facts``): each is
``decide(state, input, prepared, ctx) -> events | NoOp``, pure, with its ``prepare`` input checks;
the named states they decide on (``state``) and how the handler loads them (``loaders``); and
``handler``, the one impure shell: one write transaction per mutation (load, authorize, replay,
decide, append, project, record). ``COMMANDS`` serves exactly the mutations that
``memoree.protocol.ops`` declares. It imports the event log, the projections and the kernel,
never the read side.
"""
