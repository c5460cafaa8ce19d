"""The fact plane room: signed facts addressed by ``(cell64, band, tslot)`` (the emem Recall API).

Owns the pure emem codecs (``emem``), the plane's identity (``identity``: provenance classes,
bands, manifests, receipts), the materializers that fill cold bands (``materializers``), the
non-mutating fact ops (``readers``), the wiring of its mutations into the command handler
(``handlers``) and the REST surface (``rest``). ``emem``, ``identity`` and ``materializers`` are
pure vocabulary at kernel rank: the fact projection, commands and queries import them, and they
import nothing above the kernel. Nothing is imported here, so importing a codec stays light.
"""
