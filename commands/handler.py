"""The impure shell around the deciders: one write transaction per mutation.

For each mutation: validate the input (pure, before any lock), open ``BEGIN IMMEDIATE``, load the
state the decider needs, check existence and write scope, replay an identical earlier request or
refuse a conflicting one, call the pure decider, store content bytes, append the event, apply the
synchronous projectors and their checkpoints, read back the recorded result, commit. The spec's
check order lives here: existence and scope before the replay; revision and lifecycle checks (in
the deciders) after it, so retrying an applied revise replays its success. A decider may answer
``NoOp`` instead of events (an identical relation edge): nothing is appended, and the key is
recorded in the log's no-op table, pointing at the existing row's ``commit_seq``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from memoree.errors import IdempotencyConflict, InternalError, NotFound
from memoree.eventlog.cas import ContentStore
from memoree.eventlog.events import Scope, event_type_name
from memoree.eventlog.store import NewEvent
from memoree.projections.base import Projector, apply_events
from memoree.projections.idempotency import stored_result
from memoree.projections.relations import find_edge
from memoree.eventlog.scope import require_write_scope

from . import artifacts, claims, purge, relations
from .context import DecideContext, Decision
from .loaders import load_artifact, load_claim, load_purge_state, load_revision_sizes
from .relations import NoOp
from .state import BlobRef

__all__ = ["COMMANDS", "Command", "CommandHandler", "Outcome"]


@dataclass(frozen=True)
class Command:
    """How the handler runs one mutating op; every callable but ``load`` is pure."""

    prepare: Callable[[Any], Any]
    load: Callable[[Any, Any, Any], Any]
    authorize: Callable[[Any, Any, Scope], None]
    decide: Callable[[Any, Any, Any, DecideContext], list[Decision] | NoOp]
    blob: Callable[[Any], BlobRef | None] = lambda prepared: None
    # Side effects on the CAS: ``in_transaction`` runs before the commit, ``after_commit`` after it.
    in_transaction: Callable[[ContentStore, list[Any]], None] | None = None
    after_commit: Callable[[ContentStore, list[Any]], None] | None = None


@dataclass(frozen=True)
class Outcome:
    commit_seq: int
    result_json: bytes
    replayed: bool


def _nothing(*_: Any) -> None:
    return None


def _artifact_target(state: Any, inp: Any, scope: Scope) -> None:
    if state is None:
        raise NotFound(f"artifact {inp.artifact_id}")
    require_write_scope("artifact", state.artifact_id, state.owner, scope)


def _claim_target(state: Any, inp: Any, scope: Scope) -> None:
    if state is None:
        raise NotFound(f"claim {inp.claim_id}")
    require_write_scope("claim", state.claim_id, state.owner, scope)


def _evidence_pairs(inp: Any) -> list[tuple[str, str]]:
    return [(loc.artifact_id, loc.revision_id) for loc in inp.evidence]


def _load_claim_and_evidence(conn: Any, inp: Any, _: Any) -> tuple[Any, Any]:
    return load_claim(conn, inp.claim_id), load_revision_sizes(conn, _evidence_pairs(inp))


def _load_endpoint(conn: Any, entity_type: str, entity_id: str) -> Any:
    return load_artifact(conn, entity_id) if entity_type == "artifact" else load_claim(conn, entity_id)


def _load_relate(conn: Any, inp: Any, _: Any) -> relations.RelateState:
    return relations.RelateState(
        source=_load_endpoint(conn, inp.source_type, inp.source_id),
        target=_load_endpoint(conn, inp.target_type, inp.target_id),
        existing=find_edge(conn, inp.source_type, inp.source_id, inp.relation, inp.target_type,
                           inp.target_id),
    )


COMMANDS: dict[str, Command] = {
    "artifact.put": Command(
        prepare=artifacts.prepare_put, load=_nothing, authorize=_nothing,
        decide=lambda state, inp, blob, ctx: artifacts.decide_put(inp, blob, ctx),
        blob=lambda blob: blob,
    ),
    "artifact.revise": Command(
        prepare=artifacts.prepare_revise,
        load=lambda conn, inp, _: load_artifact(conn, inp.artifact_id),
        authorize=_artifact_target,
        decide=lambda state, inp, blob, ctx: artifacts.decide_revise(state, inp, blob, ctx),
        blob=lambda blob: blob,
    ),
    "artifact.forget": Command(
        prepare=artifacts.prepare_forget,
        load=lambda conn, inp, _: load_artifact(conn, inp.artifact_id),
        authorize=_artifact_target,
        decide=lambda state, inp, _, ctx: artifacts.decide_forget(state, inp, ctx),
    ),
    "claim.assert": Command(
        prepare=claims.prepare_assert,
        load=lambda conn, inp, _: load_revision_sizes(conn, _evidence_pairs(inp)),
        authorize=_nothing,
        decide=lambda sizes, inp, prepared, ctx: claims.decide_assert(inp, prepared, sizes, ctx),
    ),
    "claim.revise": Command(
        prepare=claims.prepare_revise, load=_load_claim_and_evidence,
        authorize=lambda state, inp, scope: _claim_target(state[0], inp, scope),
        decide=lambda state, inp, _, ctx: claims.decide_revise(state[0], inp, state[1], ctx),
    ),
    "claim.retract": Command(
        prepare=claims.prepare_retract,
        load=lambda conn, inp, _: load_claim(conn, inp.claim_id),
        authorize=_claim_target,
        decide=lambda state, inp, _, ctx: claims.decide_retract(state, inp, ctx),
    ),
    "artifact.purge": Command(
        prepare=purge.prepare_purge,
        load=lambda conn, inp, _: load_purge_state(conn, inp.artifact_id),
        authorize=lambda state, inp, scope: _artifact_target(state[0] if state else None, inp, scope),
        decide=lambda state, inp, _, ctx: purge.decide_purge(state, inp, ctx),
        in_transaction=lambda cas, events: [cas.erase_inline(d) for e in events for d in e.payload.blob_hashes],
        after_commit=lambda cas, events: cas.finish_erasure([d for e in events for d in e.payload.blob_hashes]),
    ),
    "relation.put": Command(
        prepare=relations.prepare_relate, load=_load_relate, authorize=relations.authorize_relate,
        decide=lambda state, inp, _, ctx: relations.decide_relate(state, inp, ctx),
    ),
}


class CommandHandler:
    """Runs mutations against one store: its log, its content store and its sync projectors."""

    def __init__(
        self,
        log: Any,
        cas: ContentStore,
        projectors: Sequence[Projector],
        *,
        clock: Callable[[], str],
        new_id: Callable[[str], str],
    ) -> None:
        self.log = log
        self.cas = cas
        self.projectors = list(projectors)
        self.clock = clock
        self.new_id = new_id
        self.commands = dict(COMMANDS)
        self.deferred: list[Callable[[], object]] = []
        self.lazy_commands: dict[str, Callable[[], None]] = {}

    def run_deferred(self) -> None:
        """Run side effects that must wait for the commit (the group's, under group commit)."""
        effects, self.deferred = self.deferred, []
        for effect in effects:
            effect()

    def drop_deferred(self) -> None:
        self.deferred = []

    def execute(
        self, op: str, inp: msgspec.Struct, *, scope: Scope, idempotency_key: str,
        request_digest: str,
    ) -> Outcome:
        """Run one mutation in one transaction and return its recorded result."""
        if op not in self.commands and op in self.lazy_commands:
            self.lazy_commands.pop(op)()
        command = self.commands[op]
        prepared = command.prepare(inp)
        with self.log.transaction() as conn:
            state = command.load(conn, inp, prepared)
            command.authorize(state, inp, scope)
            replay = self.replay(conn, idempotency_key, request_digest)
            if replay is not None:
                return replay
            ctx = DecideContext(now=self.clock(), new_id=self.new_id, scope=scope)
            decisions = command.decide(state, inp, prepared, ctx)
            if isinstance(decisions, NoOp):
                return self._record_noop(op, decisions, idempotency_key, request_digest, ctx.now)
            blob = command.blob(prepared)
            if blob is not None:
                self.cas.put(blob.data, blob.blob_hash)
            events = self.log.append([
                NewEvent(
                    type=event_type_name(d.payload), stream_id=d.stream_id,
                    stream_version=d.stream_version, payload=d.payload,
                    event_id=self.new_id("evt"), at=ctx.now, scope=scope,
                    idempotency_key=idempotency_key, request_digest=request_digest,
                )
                for d in decisions
            ])
            apply_events(conn, self.projectors, events)
            if command.in_transaction is not None:
                command.in_transaction(self.cas, events)
            recorded = stored_result(conn, idempotency_key)
        if command.after_commit is not None:
            effect = command.after_commit
            self.deferred.append(lambda: effect(self.cas, events))
            if not self.log.in_transaction:
                self.run_deferred()
        if recorded is None:
            raise InternalError("the mutation committed but its result was not recorded")
        return Outcome(commit_seq=recorded[2], result_json=recorded[3], replayed=False)

    def _record_noop(self, op: str, noop: NoOp, key: str, digest: str, at: str) -> Outcome:
        """Record the key of a mutation that commits nothing, pointing at the existing row."""
        result_json = msgspec.json.encode(noop.result)
        self.log.record_noop(key, digest, op, noop.commit_seq, result_json, at)
        return Outcome(commit_seq=noop.commit_seq, result_json=result_json, replayed=False)

    def replay(self, conn: Any, key: str, digest: str) -> Outcome | None:
        """The earlier outcome for an identical request under ``key``; a conflict for another."""
        recorded = stored_result(conn, key) or self.log.find_noop(key)
        if recorded is None:
            return None
        stored_digest, _, commit_seq, result_json = recorded
        if stored_digest != digest:
            raise IdempotencyConflict(key, details={"idempotency_key": key})
        return Outcome(commit_seq=commit_seq, result_json=_as_replayed(result_json), replayed=True)


def _as_replayed(result_json: bytes) -> bytes:
    document = msgspec.json.decode(result_json)
    document["created"] = False
    return msgspec.json.encode(document)
