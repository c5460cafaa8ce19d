"""The cli room: the human ``memoree`` command line (typer).

Owns the typer application and its commands (``app``, agent commands in ``agents``), ``--human``
renderings (``render``) and progress bars on stderr (``progress``). Every command prints the
same envelope ``memoree call`` would.
"""
