"""``memoree mcp``: the protocol as Model Context Protocol tools, served over stdio.

One tool per agent-facing protocol op that is registered in ``OPS`` when the server starts (so the
tool list grows as ops land), named after the op with ``_`` for ``.`` (``memory_recall``,
``artifact_put``) because MCP clients restrict tool names. Each tool's input schema is the op's
msgspec input type through ``msgspec.json.schema`` — the same source as the ``schema`` op — with
the root inlined (MCP wants ``"type": "object"`` at the root). A call becomes one ordinary
protocol request sent the way ``memoree call`` sends it (context attached on this side; the
daemon by default, the in-process store with ``--in-process`` / ``MEMOREE_IN_PROCESS=1``), and the
tool result is that request's envelope, as JSON text and as structured content, flagged as an
error when ``ok`` is false.

Idempotency: a mutating tool takes an optional ``idempotency_key``. Without one the key is
derived from the call itself, ``mcp_<BLAKE3 hex(op \\0 canonical JSON of the arguments)>``: an
identical call is a retry of the same logical mutation and replays the first result
(``created: false``) instead of writing twice; to write the same thing twice on purpose, pass two
keys. The service namespaces keys by context, so equal calls in different projects never meet.

Only MCP traffic goes to stdout; logs go to stderr. The ``mcp`` SDK is imported here only, and
this module only by the ``mcp`` command, so ``memoree call`` never pays for it.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from dataclasses import dataclass
from typing import Any

import msgspec

from memoree.client.call import CallOptions
from memoree.agents.caller import Sender, canonical_json, derived_key, new_request

__all__ = ["AGENT_OPS", "ToolSpec", "build_tools", "derived_tool_key", "run", "tool_request"]

KEY_PREFIX = "mcp"
IDEMPOTENCY_ARGUMENT = "idempotency_key"

# The ops an agent uses, in the order a tool list shows them, each with what it is for. An op
# becomes a tool only if it is registered in OPS when the server starts.
AGENT_OPS: dict[str, str] = {
    "memory.recall": "Ask whether memory knows something: current claims with their exact evidence citations, and separate artifact references.",
    "memory.retrieve": "Recall plus one bounded recovery step when recall finds little.",
    "memory.probe": "List unqualified leads for a query (candidates to check, not answers).",
    "search": "Ranked lexical search over artifacts and claims, with exact citations and currentness.",
    "context.build": "Build a byte-bounded Markdown bundle of what memory holds about a query, with a manifest; its content is untrusted data.",
    "citation.get": "Fetch the exact bytes a memoree://artifact/...#start-end citation names.",
    "fact.recall": "Recall signed facts (emem) with receipts.",
    "context.resolve": "Show the ambient workspace/project/task these tools act in.",
    "artifact.put": "Store evidence (a document, note or record) as a new artifact; keep the returned artifact_id and revision_id to cite it.",
    "artifact.get": "Read an artifact (its current revision unless revision_id is given).",
    "artifact.revise": "Add a new immutable revision to an artifact; if_revision must be the revision you read.",
    "artifact.history": "List an artifact's revisions, newest first.",
    "claim.assert": "Record one typed claim citing evidence: artifact_id, revision_id and a [start_byte, end_byte) span.",
    "claim.get": "Read a claim (its current revision unless revision_id is given).",
    "claim.revise": "Revise a claim; evidence and confidence are replaced, not merged; if_revision must be the revision you read.",
    "claim.retract": "Retract a claim with a reason; its history stays.",
    "claim.history": "List a claim's revisions, newest first.",
    "relation.put": "Add one typed relation between artifacts or claims (for supersedes: source is the newer).",
    "relation.list": "List relations one hop from an artifact or claim, newest first.",
    "conflict.list": "List open contradictions between claims, newest first.",
}

_KEY_NOTE = (" Mutation: pass idempotency_key naming the logical change; without one, the key is "
             "derived from the tool name and arguments, so an identical call replays the first "
             "result (created=false) instead of writing twice.")


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name, the op it sends, what it is for and its JSON input schema."""

    name: str
    op: str
    description: str
    input_schema: dict[str, Any]
    mutating: bool


def tool_name(op: str) -> str:
    return op.replace(".", "_")


def build_tools(ops: dict[str, Any] | None = None) -> list[ToolSpec]:
    """The tools for the agent ops registered in ``ops`` (default: the live registry)."""
    if ops is None:
        from memoree.protocol.ops import OPS as ops  # noqa: N811 - the registry, read at call time
    tools = []
    for op, purpose in AGENT_OPS.items():
        spec = ops.get(op)
        if spec is None:
            continue
        schema = input_schema(spec.input_type, mutating=spec.mutating)
        tools.append(ToolSpec(name=tool_name(op), op=op, mutating=spec.mutating,
                              description=purpose + (_KEY_NOTE if spec.mutating else ""),
                              input_schema=schema))
    return tools


def input_schema(input_type: Any, *, mutating: bool) -> dict[str, Any]:
    """``msgspec.json.schema`` of the op's input with its root inlined (plus the key for mutations)."""
    generated = msgspec.json.schema(input_type)
    defs = dict(generated.get("$defs", {}))
    ref = generated.get("$ref", "")
    root_name = ref.rsplit("/", 1)[-1] if ref.startswith("#/$defs/") else None
    if root_name is None:
        root = {k: v for k, v in generated.items() if k != "$defs"}
    else:
        root = copy.deepcopy(defs[root_name])
        others = [schema for name, schema in defs.items() if name != root_name]
        if f'"#/$defs/{root_name}"' not in json.dumps(others):
            defs.pop(root_name)  # nothing else refers to the root, so it lives only at the top
    if mutating:
        root.setdefault("properties", {})[IDEMPOTENCY_ARGUMENT] = {
            "type": "string", "minLength": 1, "maxLength": 512,
            "description": ("Names the logical mutation; reuse it only for an exact retry. "
                            "Default: derived from this call's arguments."),
        }
    if defs:
        root["$defs"] = defs
    return root


def derived_tool_key(op: str, arguments: dict[str, Any]) -> str:
    """``mcp_<BLAKE3 hex(op \\0 canonical JSON of the arguments)>``."""
    return derived_key(KEY_PREFIX, op, canonical_json(arguments))


def tool_request(tool: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """The protocol request a tool call sends; a bad ``idempotency_key`` raises ValueError."""
    payload = dict(arguments)
    key = None
    if tool.mutating:
        key = payload.pop(IDEMPOTENCY_ARGUMENT, None)
        if key is None:
            key = derived_tool_key(tool.op, payload)
        elif not isinstance(key, str) or not key.strip():
            raise ValueError("idempotency_key must be a non-empty string")
    return new_request(tool.op, payload, idempotency_key=key)


def run(options: CallOptions) -> None:
    """Serve MCP on stdin/stdout until the client closes the stream."""
    import anyio

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    anyio.run(_serve, Sender(options))


async def _serve(sender: Sender) -> None:
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    from memoree import __version__

    tools = {tool.name: tool for tool in build_tools()}
    listed = [types.Tool(name=t.name, description=t.description, inputSchema=t.input_schema)
              for t in tools.values()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> Any:
        envelope = await anyio.to_thread.run_sync(_answer, sender, tools, params.name,
                                                  params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(envelope, ensure_ascii=False))],
            structuredContent=envelope, isError=not envelope.get("ok", False),
        )

    server = Server("memoree", version=__version__, instructions=server_instructions(),
                    on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def server_instructions() -> str:
    """The protocol's agent instructions, prefaced with how tools map onto ops."""
    from memoree.service.discovery import instructions

    preface = ("These tools are memoree protocol operations (`artifact_put` is `artifact.put`); "
               "each returns the protocol's JSON response envelope.\n\n")
    return preface + instructions("markdown")["content"]


def _answer(sender: Sender, tools: dict[str, ToolSpec], name: str,
            arguments: dict[str, Any]) -> dict[str, Any]:
    tool = tools.get(name)
    if tool is None:
        return _failure(f"unknown tool {name!r}; list_tools shows the available ones")
    try:
        document = tool_request(tool, arguments)
    except ValueError as exc:
        return _failure(str(exc))
    envelope, _ = sender.send(document)
    return envelope


def _failure(message: str) -> dict[str, Any]:
    return {"v": 1, "request_id": "req_mcp", "ok": False,
            "error": {"code": "INVALID_REQUEST", "message": f"invalid request: {message}",
                      "retryable": False, "details": None},
            "warnings": []}
