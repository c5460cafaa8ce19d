"""The op declarations: every protocol op, declared once.

Each ``OpSpec`` says what the op is called, the typed input it decodes into, what it returns
(the name of its result type in ``memoree.protocol.results``), whether it mutates, what serves
it (a reader in ``memoree.service.readers``; a mutation is served by the command of the same
name in ``memoree.commands.handler.COMMANDS``), its help text, and how it is exposed: as an MCP
tool (name, title, behaviour hints, per-parameter descriptions) and as CLI commands. Everything
else is derived from this table: the service's validation and dispatch, the daemon's mutation
detection, ``capabilities``, ``instructions`` and ``schema``, the MCP tool list and the CLI's
request wrappers; ``tests/memoree/test_ops.py`` checks that each of them shows exactly these ops.
Only implemented ops appear, so discovery never advertises a roadmap feature.

Adding an op: one ``OpSpec`` here, plus its reader (or its decider and ``Command``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from memoree import inputs
from memoree.service import readers

__all__ = ["MCP_KEY_NOTE", "OPS", "McpTool", "OpSpec", "ToolHints", "cli_ops", "mcp_ops"]

Reader = Callable[[Any, Any, Any], Any]

MCP_KEY_NOTE = (" Mutation: pass idempotency_key naming the logical change; without one, the key is "
                "derived from the tool name and arguments, so an identical call replays the first "
                "result (created=false) instead of writing twice.")


@dataclass(frozen=True)
class ToolHints:
    """MCP tool annotations: how calling the tool behaves (hints for a client, not guarantees)."""

    read_only: bool
    destructive: bool = False
    idempotent: bool = True
    open_world: bool = False


READ = ToolHints(read_only=True)
WRITE = ToolHints(read_only=False)
DESTROY = ToolHints(read_only=False, destructive=True)


@dataclass(frozen=True)
class McpTool:
    """An op's MCP tool: its place in the tool list, its title, hints and parameter help."""

    rank: int
    title: str
    hints: ToolHints
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OpSpec:
    name: str
    input_type: type[msgspec.Struct]
    summary: str
    reader: Reader | None = None
    result: str | None = None
    mutating: bool = False
    needs_context: bool = False
    horizon: bool = False
    side_effecting: bool = False
    long_running: bool = False
    events: tuple[str, ...] = ()
    mcp: McpTool | None = None
    cli: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.mutating == (self.reader is not None):
            raise TypeError(f"{self.name}: a mutation is served by its command, a read by its reader")
        if self.mutating != bool(self.events):
            raise TypeError(f"{self.name}: a mutation names the events it appends, a read none")

    @property
    def tool_name(self) -> str:
        """The MCP tool name: the op name with ``_`` for ``.`` (MCP clients restrict names)."""
        return self.name.replace(".", "_")

    @property
    def tool_description(self) -> str:
        return self.summary + (MCP_KEY_NOTE if self.mutating else "")


def _ops(*specs: OpSpec) -> dict[str, OpSpec]:
    return {spec.name: spec for spec in specs}


OPS: dict[str, OpSpec] = _ops(
    OpSpec("context.resolve", inputs.EmptyInput, "Show the ambient workspace/project/task these tools act in.",
           reader=readers.context_resolve, needs_context=True,
           mcp=McpTool(8, "Show the ambient context", READ)),
    OpSpec("capabilities", inputs.EmptyInput,
           "What this store serves: its operations, size limits, storage, retrieval and node key.",
           reader=readers.capabilities, cli=(("capabilities",),)),
    OpSpec("instructions", inputs.InstructionsInput,
           "The agent instructions (Markdown or JSON), generated from the protocol types.",
           reader=readers.instructions, cli=(("instructions",),)),
    OpSpec("schema", inputs.EmptyInput, "The JSON Schema of every operation's input and typed result.",
           reader=readers.schema, cli=(("schema",),)),
    OpSpec("doctor", inputs.EmptyInput,
           "Health and identity: who serves, which store, how far the log and each projection are.",
           reader=readers.doctor, cli=(("doctor",),)),
    OpSpec("verify", inputs.EmptyInput,
           "Check the whole store without writing: the hash chain, checkpoints, signatures, blobs, "
           "and a replay of every projection.",
           reader=readers.verify, long_running=True, cli=(("verify",),)),
    OpSpec("backup.create", inputs.BackupCreateInput,
           "Publish a backup of the store at a destination outside the data dir, verified by replay first.",
           reader=readers.backup_create, side_effecting=True, long_running=True, cli=(("backup", "create"),)),
    # Many mutations in one write transaction (bulk loaders): not itself a mutation (each request
    # in it carries its own key), but it writes, so it runs on the writer (side_effecting).
    OpSpec("batch", inputs.BatchInput,
           "Run many complete mutation requests in one write transaction, each answered as if alone.",
           reader=readers.batch, side_effecting=True,
           mcp=McpTool(26, "Run several mutations at once", DESTROY)),
    OpSpec("artifact.put", inputs.ArtifactPutInput,
           "Store evidence (a document, note or record) as a new artifact; keep the returned artifact_id "
           "and revision_id to cite it.",
           result="ArtifactMutationResult", mutating=True, needs_context=True, events=("artifact.created",),
           mcp=McpTool(9, "Store an artifact", WRITE), cli=(("artifact", "put"),)),
    OpSpec("artifact.get", inputs.ArtifactGetInput,
           "Read an artifact (its current revision unless revision_id is given).",
           reader=readers.artifact_get, result="ArtifactRecord",
           mcp=McpTool(10, "Read an artifact", READ), cli=(("artifact", "get"),)),
    OpSpec("artifact.revise", inputs.ArtifactReviseInput,
           "Add a new immutable revision to an artifact; if_revision must be the revision you read.",
           result="ArtifactMutationResult", mutating=True, needs_context=True, events=("artifact.revised",),
           mcp=McpTool(11, "Revise an artifact", WRITE), cli=(("artifact", "revise"),)),
    OpSpec("artifact.append", inputs.ArtifactAppendInput,
           "Append bytes to an artifact: a new revision holding its current bytes followed by content; "
           "if_revision must be the revision you read.",
           result="ArtifactMutationResult", mutating=True, needs_context=True, events=("artifact.revised",),
           mcp=McpTool(21, "Append to an artifact", WRITE)),
    OpSpec("artifact.list", inputs.ArtifactListInput,
           "Browse stored artifacts in the ambient context, newest first, with a cursor; filter by exact "
           "title, kind or provenance fields.",
           reader=readers.artifact_list, result="ArtifactList", needs_context=True, horizon=True,
           mcp=McpTool(24, "Browse recent artifacts", READ)),
    OpSpec("claim.list", inputs.ClaimListInput,
           "Browse claims in the ambient context, newest first, with a cursor; filter by type, status, "
           "actor or the artifact they cite.",
           reader=readers.claim_list, result="ClaimList", needs_context=True, horizon=True,
           mcp=McpTool(25, "Browse claims", READ)),
    OpSpec("artifact.history", inputs.ArtifactHistoryInput, "List an artifact's revisions, newest first.",
           reader=readers.artifact_history, result="ArtifactHistory",
           mcp=McpTool(12, "List an artifact's revisions", READ), cli=(("artifact", "history"),)),
    OpSpec("artifact.forget", inputs.ArtifactForgetInput,
           "Forget an artifact with a reason: it leaves retrieval; exact reads and its history stay.",
           result="ArtifactMutationResult", mutating=True, needs_context=True, events=("artifact.forgotten",),
           mcp=McpTool(22, "Forget an artifact", DESTROY), cli=(("artifact", "forget"),)),
    OpSpec("artifact.purge", inputs.ArtifactPurgeInput,
           "Erase an artifact's bytes from the content store and the search index; the log still verifies.",
           result="ArtifactMutationResult", mutating=True, needs_context=True, events=("artifact.purged",),
           mcp=McpTool(23, "Purge an artifact's bytes", DESTROY), cli=(("purge",),)),
    OpSpec("claim.assert", inputs.ClaimAssertInput,
           "Record one typed claim citing evidence: artifact_id, revision_id and a [start_byte, end_byte) span.",
           result="ClaimMutationResult", mutating=True, needs_context=True, events=("claim.asserted",),
           mcp=McpTool(13, "Assert a claim", WRITE), cli=(("claim", "assert"),)),
    OpSpec("claim.get", inputs.ClaimGetInput, "Read a claim (its current revision unless revision_id is given).",
           reader=readers.claim_get, result="ClaimRecord",
           mcp=McpTool(14, "Read a claim", READ), cli=(("claim", "get"),)),
    OpSpec("claim.history", inputs.ClaimHistoryInput, "List a claim's revisions, newest first.",
           reader=readers.claim_history, result="ClaimHistory",
           mcp=McpTool(17, "List a claim's revisions", READ), cli=(("claim", "history"),)),
    OpSpec("claim.revise", inputs.ClaimReviseInput,
           "Revise a claim; evidence and confidence are replaced, not merged; if_revision must be the "
           "revision you read.",
           result="ClaimMutationResult", mutating=True, needs_context=True, events=("claim.revised",),
           mcp=McpTool(15, "Revise a claim", WRITE), cli=(("claim", "revise"),)),
    OpSpec("claim.retract", inputs.ClaimRetractInput, "Retract a claim with a reason; its history stays.",
           result="ClaimMutationResult", mutating=True, needs_context=True, events=("claim.retracted",),
           mcp=McpTool(16, "Retract a claim", DESTROY), cli=(("claim", "retract"),)),
    OpSpec("relation.put", inputs.RelationPutInput,
           "Add one typed relation between artifacts or claims (for supersedes: source is the newer).",
           result="RelationMutationResult", mutating=True, needs_context=True, events=("relation.added",),
           mcp=McpTool(18, "Relate two entities", WRITE), cli=(("link",),)),
    OpSpec("relation.list", inputs.RelationListInput, "List relations one hop from an artifact or claim, newest first.",
           reader=readers.relation_list, result="RelationList", needs_context=True, horizon=True,
           mcp=McpTool(19, "List relations", READ), cli=(("relation", "list"),)),
    OpSpec("conflict.list", inputs.ConflictListInput, "List open contradictions between claims, newest first.",
           reader=readers.conflict_list, result="ConflictList", needs_context=True, horizon=True,
           mcp=McpTool(20, "List conflicts", READ), cli=(("conflict", "list"),)),
    OpSpec("search", inputs.SearchInput,
           "Ranked lexical search over artifacts and claims, with exact citations and currentness.",
           reader=readers.search, result="SearchResult", needs_context=True, horizon=True,
           mcp=McpTool(4, "Search memory", READ), cli=(("search",),)),
    OpSpec("memory.recall", inputs.RecallInput,
           "Ask whether memory knows something: current claims with their exact evidence citations, "
           "and separate artifact references.",
           reader=readers.memory_recall, result="RecallResult", needs_context=True, horizon=True,
           mcp=McpTool(1, "Recall from memory", READ), cli=(("recall",),)),
    OpSpec("context.build", inputs.ContextBuildInput,
           "Build a byte-bounded Markdown bundle of what memory holds about a query, with a manifest; "
           "its content is untrusted data.",
           reader=readers.context_build, result="ContextBuildResult", needs_context=True, horizon=True,
           mcp=McpTool(5, "Build a context bundle", READ), cli=(("context", "build"),)),
    OpSpec("memory.probe", inputs.ProbeInput, "List unqualified leads for a query (candidates to check, not answers).",
           reader=readers.memory_probe, result="ProbeResult", needs_context=True, horizon=True,
           mcp=McpTool(3, "Probe memory for leads", READ), cli=(("probe",),)),
    OpSpec("memory.retrieve", inputs.RetrieveInput, "Recall plus one bounded recovery step when recall finds little.",
           reader=readers.memory_retrieve, result="RetrieveResult", needs_context=True, horizon=True,
           mcp=McpTool(2, "Retrieve from memory", READ), cli=(("retrieve",),)),
    OpSpec("citation.get", inputs.CitationGetInput,
           "Fetch the exact bytes a memoree://artifact/...#start-end citation names.",
           reader=readers.citation_get, result="CitationResult",
           mcp=McpTool(6, "Fetch a citation's bytes", READ), cli=(("citation", "get"),)),
    # The signed fact plane (emem). fact.recall may write (a cold band materializes) but is not a
    # protocol mutation: no idempotency key, no ambient context (emem's scope is in the input).
    OpSpec("band.register", inputs.BandRegisterInput,
           "Register a band that signed facts are recorded in: attested by agents, or filled from a CSV file.",
           result="BandMutationResult", mutating=True, needs_context=True, events=("band.registered",),
           cli=(("band", "register"), ("band", "add-file"))),
    OpSpec("band.list", inputs.EmptyInput, "List the bands known here, with their materializers.",
           reader=readers.band_list, cli=(("band", "list"),)),
    OpSpec("fact.attest", inputs.FactAttestInput,
           "Attest one fact at (cell64, band, tslot), signed with the node key, with its receipt.",
           result="FactAttestResult", mutating=True, needs_context=True, events=("fact.attested",),
           cli=(("fact", "attest"),)),
    OpSpec("fact.recall", inputs.FactRecallInput, "Recall signed facts (emem) with receipts.",
           reader=readers.fact_recall, side_effecting=True,
           mcp=McpTool(7, "Recall signed facts", ToolHints(read_only=False, open_world=True)),
           cli=(("fact", "recall"),)),
    OpSpec("receipt.verify", inputs.ReceiptVerifyInput,
           "Check a signed receipt: its signature, its facts' cids and their Merkle inclusion proofs.",
           reader=readers.receipt_verify),
    OpSpec("fact.identity", inputs.EmptyInput,
           "The fact plane's identity: the node key, the manifest and its source versions.",
           reader=readers.fact_identity),
)


def mcp_ops(ops: Mapping[str, OpSpec] = OPS) -> list[OpSpec]:
    """The ops exposed as MCP tools, in tool-list order."""
    return sorted((spec for spec in ops.values() if spec.mcp is not None),
                  key=lambda spec: spec.mcp.rank if spec.mcp else 0)


def cli_ops(ops: Mapping[str, OpSpec] = OPS) -> dict[tuple[str, ...], OpSpec]:
    """Each CLI command path that sends an op, and the op it sends."""
    return {path: spec for spec in ops.values() for path in spec.cli}
