"""The impure shell around the deciders: one write transaction per mutation.

For each mutation: validate the input (pure, before any lock), open ``BEGIN IMMEDIATE``, load the
state the decider needs, check existence and write scope, replay an identical earlier request or
refuse a conflicting one, call the pure decider, store content bytes, append the event, apply the
synchronous projectors and their checkpoints, read back the recorded result, commit. The spec's
check order lives here: existence and scope before the replay; revision and lifecycle checks (in
the deciders) after it, so retrying an applied revise replays its success. A decider may answer
``NoOp`` instead of events (an identical relation edge): nothing is appended, and the key is
recorded in the log's no-op table, pointing at the existing row's ``commit_seq``. Inside
``bulk()`` (a ``batch`` request), runs of small puts are decided here one by one and written
together by ``commands.bulk``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgspec

from memoree.errors import IdempotencyConflict, InternalError, InvalidRequest, NotFound
from memoree.eventlog.cas import ContentStore
from memoree.eventlog.events import Scope
from memoree.eventlog.keys import NodeKey
from memoree.eventlog.scope import require_write_scope
from memoree.eventlog.store import EventStore, RecordedEvent, StaleDecision
from memoree.projections.base import Projector, apply_events, projection_sink
from memoree.projections.idempotency import result_document, stored_result

from . import artifacts, claims, facts, purge, relations
from .bulk import PutRun, replayed_document
from .context import DecideContext, Decision, new_event
from .loaders import (
    load_append_state,
    load_cited_revisions,
    load_claim_revision,
    load_nothing,
    load_purge,
    load_relate,
    load_target_artifact,
    load_target_claim,
)
from .relations import NoOp

__all__ = ["COMMANDS", "Command", "CommandHandler", "Outcome"]

STALE_RETRIES = 3

CasEffect = Callable[[ContentStore, Sequence[RecordedEvent]], None]


def anyone(state: Any, inp: Any, scope: Scope) -> None:
    """For a command whose decider does every check itself."""


@dataclass(frozen=True)
class Command:
    """How the handler runs one mutating op. ``prepare`` and ``decide`` are pure.

    ``prepare(input)`` checks the input before any lock (``prepare(input, node_key)`` when the
    command ``signs``); ``load(conn, input, prepared)`` reads the state; ``authorize(state, input,
    scope)`` checks existence and write scope; ``decide(state, input, prepared, ctx)`` returns
    the events, or a ``NoOp``. A command that ``stores_blob`` prepared a ``BlobRef`` to put in
    the CAS. ``in_transaction`` runs on the CAS before the commit, ``after_commit`` after it.
    """

    prepare: Callable[..., Any]
    load: Callable[[Any, Any, Any], Any]
    decide: Callable[[Any, Any, Any, DecideContext], list[Decision] | NoOp]
    authorize: Callable[[Any, Any, Scope], None] = anyone
    stores_blob: bool = False
    signs: bool = False
    # Content that depends on stored bytes (``artifact.append``): ``compose(cas, state, prepared)``
    # runs after the replay check and its result replaces ``prepared`` for ``decide`` and the CAS.
    compose: Callable[[ContentStore, Any, Any], Any] | None = None
    in_transaction: CasEffect | None = None
    after_commit: CasEffect | None = None


@dataclass(frozen=True)
class Outcome:
    commit_seq: int
    result_json: bytes
    replayed: bool


def writable_artifact(state: Any, inp: Any, scope: Scope) -> None:
    """The artifact exists and ``scope`` may write it."""
    if state is None:
        raise NotFound(f"artifact {inp.artifact_id}")
    require_write_scope("artifact", state.artifact_id, state.owner, scope)


def writable_claim(state: Any, inp: Any, scope: Scope) -> None:
    """The claim exists and ``scope`` may write it."""
    if state is None:
        raise NotFound(f"claim {inp.claim_id}")
    require_write_scope("claim", state.claim_id, state.owner, scope)


def writable_claim_revision(state: Any, inp: Any, scope: Scope) -> None:
    writable_claim(state.claim if state is not None else None, inp, scope)


def writable_purge(state: Any, inp: Any, scope: Scope) -> None:
    writable_artifact(state.artifact if state is not None else None, inp, scope)


def append_stored(cas: ContentStore, state: Any, appended: Any) -> Any:
    """The appended revision's bytes: the current ones read from the CAS, then the new ones
    (a forgotten artifact is refused first: purged bytes are gone)."""
    head = state.artifact
    if head.status == "forgotten":
        raise InvalidRequest(f"artifact {head.artifact_id} has been forgotten and cannot be appended to")
    return artifacts.compose_append(cas.get(state.blob_hash, state.size_bytes), appended)


def writable_append(state: Any, inp: Any, scope: Scope) -> None:
    writable_artifact(state.artifact if state is not None else None, inp, scope)


# One entry per mutating op; the op declarations (memoree.protocol.ops) name the same ops.
COMMANDS: Mapping[str, Command] = {
    "artifact.put": Command(prepare=artifacts.prepare_put, load=load_nothing,
                            decide=artifacts.decide_put, stores_blob=True),
    "artifact.revise": Command(prepare=artifacts.prepare_revise, load=load_target_artifact,
                               authorize=writable_artifact, decide=artifacts.decide_revise,
                               stores_blob=True),
    "artifact.append": Command(prepare=artifacts.prepare_append, load=load_append_state,
                               authorize=writable_append, decide=artifacts.decide_append,
                               stores_blob=True, compose=append_stored),
    "artifact.forget": Command(prepare=artifacts.prepare_forget, load=load_target_artifact,
                               authorize=writable_artifact, decide=artifacts.decide_forget),
    "claim.assert": Command(prepare=claims.prepare_assert, load=load_cited_revisions,
                            decide=claims.decide_assert),
    "claim.revise": Command(prepare=claims.prepare_revise, load=load_claim_revision,
                            authorize=writable_claim_revision, decide=claims.decide_revise),
    "claim.retract": Command(prepare=claims.prepare_retract, load=load_target_claim,
                             authorize=writable_claim, decide=claims.decide_retract),
    "artifact.purge": Command(prepare=purge.prepare_purge, load=load_purge, authorize=writable_purge,
                              decide=purge.decide_purge, in_transaction=purge.erase_inline_blobs,
                              after_commit=purge.finish_erasure),
    "relation.put": Command(prepare=relations.prepare_relate, load=load_relate,
                            authorize=relations.authorize_relate, decide=relations.decide_relate),
    "band.register": Command(prepare=facts.prepare_band, load=facts.load_band_state,
                             decide=facts.decide_band_register),
    "fact.attest": Command(prepare=facts.prepare_attest, load=facts.load_attest, decide=facts.decide_attest,
                           signs=True),
}


class CommandHandler:
    """Runs mutations against one store: its log, its content store and its sync projectors."""

    def __init__(
        self,
        log: EventStore,
        cas: ContentStore,
        projectors: Sequence[Projector],
        *,
        clock: Callable[[], str],
        new_id: Callable[[str], str],
        node_key: Callable[[], NodeKey],
    ) -> None:
        self.log = log
        self.cas = cas
        self.projectors = list(projectors)
        self.clock = clock
        self.new_id = new_id
        self.node_key = node_key
        self.deferred: list[Callable[[], object]] = []
        self.run: PutRun | None = None  # inside ``bulk()``: the puts decided, not written yet

    def expect_keys(self, keys: Sequence[str]) -> None:
        """Inside ``bulk()``: the namespaced keys of the requests to come, looked up at once (a
        key left out, or a wrong one, only costs its put a look-up of its own)."""
        if self.run is not None:
            self.run.expect(keys)

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Inside an open write transaction (a group): runs of small ``artifact.put`` requests
        are answered one by one and written together (``commands.bulk``). Their writes go in
        before any other mutation and at the block's end; a failure to write them fails the
        block (the caller's transaction must then roll back), never one request."""
        if self.run is not None:
            yield
            return
        run = self.run = PutRun(self)
        try:
            yield
            run.write()
        finally:
            self.run = None

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
        """Run one mutation in one transaction and return its recorded result.

        On a shared log the decision is optimistic: when another host appended between this
        host's catch-up and its append (``StaleDecision``), the attempt is rolled back and made
        again on the caught-up projections (the retry holds the append lock, so it cannot be stale).
        """
        command = COMMANDS[op]
        prepared = command.prepare(inp, self.node_key()) if command.signs else command.prepare(inp)
        if self.run is not None:
            if self.run.takes(op, prepared):
                commit_seq, result_json, replayed = self.run.put(inp, prepared, scope, idempotency_key,
                                                                 request_digest, command.decide)
                return Outcome(commit_seq=commit_seq, result_json=result_json, replayed=replayed)
            self.run.before_other_mutation()
        for attempt in range(STALE_RETRIES + 1):
            try:
                return self._execute_once(op, command, inp, prepared, scope, idempotency_key, request_digest)
            except StaleDecision:
                if attempt == STALE_RETRIES:
                    raise
                self.log.prepare_retry()
        raise InternalError("unreachable")  # pragma: no cover - the loop returns or raises

    def _execute_once(self, op: str, command: Command, inp: msgspec.Struct, prepared: Any, scope: Scope,
                      idempotency_key: str, request_digest: str) -> Outcome:
        # A command that decides on its input alone (``load_nothing``) needs no projection
        # caught up first: a shared log may skip that (it catches up after the append instead).
        with self.log.transaction(decides_on_input=command.load is load_nothing) as conn:
            state = command.load(conn, inp, prepared)
            command.authorize(state, inp, scope)
            replay = self.replay(conn, idempotency_key, request_digest)
            if replay is not None:
                return replay
            if command.compose is not None:
                prepared = command.compose(self.cas, state, prepared)
            ctx = DecideContext(now=self.clock(), new_id=self.new_id, scope=scope)
            decisions = command.decide(state, inp, prepared, ctx)
            if isinstance(decisions, NoOp):
                return self._record_noop(op, decisions, idempotency_key, request_digest, ctx.now)
            if command.stores_blob:
                self.cas.put(prepared.data, prepared.blob_hash)
            events = self.log.append([new_event(d, ctx, idempotency_key, request_digest)
                                      for d in decisions])
            self.project_appended(conn, events)
            if command.in_transaction is not None:
                command.in_transaction(self.cas, events)
            recorded = _keyed_result(conn, events, idempotency_key)
        if command.after_commit is not None:
            effect = command.after_commit
            self.deferred.append(lambda: effect(self.cas, events))
            if not self.log.in_transaction:
                self.run_deferred()
        if recorded is None:
            raise InternalError("the mutation committed but its result was not recorded")
        return Outcome(commit_seq=recorded[0], result_json=recorded[1], replayed=False)

    def project_appended(self, conn: Any, events: Sequence[RecordedEvent]) -> None:
        """Apply an append's events to the projectors. On a shared log the append may have stored
        other hosts' events ahead of them and left their projection to this call (``taken_in``):
        those and these are applied in one batch, as a page of the catch-up is, instead of two."""
        taken_in = getattr(self.log, "taken_in", None)  # only a shared log takes events in
        if taken_in is None:
            apply_events(conn, self.projectors, events)
            return
        with taken_in() as before:
            if not before:
                apply_events(conn, self.projectors, events)
                return
            projection_sink(self.projectors)(conn, [*before, *events])

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
        return Outcome(commit_seq=commit_seq, result_json=replayed_document(result_json), replayed=True)


def _keyed_result(conn: Any, events: Sequence[RecordedEvent], key: str) -> tuple[int, bytes] | None:
    """``(commit_seq, result document)`` of the event appended under ``key``, as recorded."""
    for event in reversed(events):
        if event.idempotency_key == key:
            document = result_document(conn, event)
            return None if document is None else (event.commit_seq, document)
    return None


