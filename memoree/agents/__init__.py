"""The agents room: caller-side compositions for AI agents, all clients of the protocol.

Owns the MCP server (``mcp_server``), ``remember`` and its external claim compiler
(``remember``, ``compiler``), checkpoint notes and their quarantine (``pending``), importers
from other agent memories (``importers``) and their shared way to the store (``caller``).
"""
