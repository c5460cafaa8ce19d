"""Per-request latency on the LoCoMo dev store through a warm daemon, against raw FTS5 over turns.

    python -m tools.bench.locomo [--data ../shared/eval/locomo-dev] [--only 26] [--questions N]
                                 [--set MEMOREE_NAME=VALUE] [--quick]

Loads the conversations the way ``memoree eval`` does (one project per conversation, one artifact
per session, one claim per observation citing its turns; ``memoree.admin.locomo``) into a data
dir, starts ``memoree serve`` on it, and sends every question's ``context.build`` (2,000 bytes),
``memory.recall`` (defaults) and ``search`` (limit 10) over the socket, one connection per
request as a client would, after a warm-up of 20 questions. The baseline, measured in the same run on the
same questions, is the evaluation's raw FTS5 query: BM25 over one row per turn, top turns packed
into 2,000 bytes (``TurnIndex.pack``). Rows are p50 and p99 in milliseconds; the ratio is
ours/baseline. A last row, the daemon round trip of ``capabilities`` (socket, framing, dispatch),
says how much of a request is transport. ``--set`` passes a setting to the daemon (e.g.
``MEMOREE_READ_PROCESSES=1``: how much a sequential client gains from finding the same warm
reader). Skipped, with the reason, when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memoree.admin.locomo import LocomoOptions, load_conversation, selected_questions
from memoree.admin.locomo_data import Conversation, Question, read_dataset
from memoree.admin.locomo_scoring import TurnIndex
from memoree.client.transport import Endpoint, exchange
from memoree.admin.evaluation import Client
from memoree.service.service import Service
from tools.bench.common import Row, percentile, print_table
from tools.bench.daemon import start_daemon

DEFAULT_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "locomo-dev"
BUDGET = 2000
OPS: dict[str, tuple[str, dict]] = {
    "context.build (2,000 B)": ("context.build", {"max_bytes": BUDGET}),
    "memory.recall": ("memory.recall", {}),
    "search (limit 10)": ("search", {"limit": 10}),
}
BASELINE_NAME = "FTS5 bm25 over turns + pack"
ROUND_TRIP = "capabilities"
WARM_UP = 20


def load_store(data_dir: Path, conversations: list[Conversation]) -> None:
    """The dev store in ``data_dir``, written in-process (the daemon then serves it)."""
    service = Service(data_dir, synchronous="OFF")
    try:
        client = Client(service)
        for conversation in conversations:
            load_conversation(client, conversation)
    finally:
        service.close()


def daemon_request(endpoint: Endpoint, number: int, op: str, payload: dict, context: dict) -> bytes:
    body = json.dumps({"v": 1, "request_id": f"b{number}", "op": op, "context": context,
                       "input": payload}).encode()
    reply = exchange(endpoint, body)
    if b'"ok":true' not in reply[:200]:
        raise RuntimeError(f"{op} failed: {reply[:300]!r}")
    return reply


def timed_ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def measure(endpoint: Endpoint, asked: list[tuple[Conversation, Question]],
            indexes: dict[str, TurnIndex]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in (*OPS, BASELINE_NAME, ROUND_TRIP)}
    counter = 0
    for timing, batch in ((False, asked[:WARM_UP]), (True, asked)):
        for conversation, question in batch:
            for name, (op, extra) in OPS.items():
                counter += 1
                payload = {"query": question.question, **extra}
                ms = timed_ms(lambda: daemon_request(endpoint, counter, op, payload, conversation.context))
                if timing:
                    samples[name].append(ms)
            index = indexes[conversation.name]
            ms = timed_ms(lambda: index.pack(question.question, BUDGET))
            round_trip = timed_ms(lambda: daemon_request(endpoint, counter, "capabilities", {}, conversation.context))
            if timing:
                samples[BASELINE_NAME].append(ms)
                samples[ROUND_TRIP].append(round_trip)
    return samples


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo-format folder")
    parser.add_argument("--only", action="append", default=[], help="only this conversation (repeatable)")
    parser.add_argument("--questions", type=int, default=None, help="the first N questions of each conversation")
    parser.add_argument("--set", action="append", default=[], metavar="MEMOREE_NAME=VALUE",
                        help="a setting for the daemon (repeatable)")
    parser.add_argument("--quick", action="store_true", help="one conversation, 10 questions (CI smoke)")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no LoCoMo folder at {args.data}")
        return []
    conversations = read_dataset(args.data, tuple(args.only))
    if args.quick:
        conversations, args.questions = conversations[:1], 10
    options = LocomoOptions(questions_per_conversation=args.questions)
    asked = [(c, q) for c in conversations for q in selected_questions(c, options)]
    indexes = {c.name: TurnIndex(list(c.turns.values())) for c in conversations}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        load_store(folder / "daemon-data", conversations)
        loaded = time.perf_counter() - started
        proc, endpoint = start_daemon(folder, **dict(setting.split("=", 1) for setting in args.set))
        try:
            samples = measure(endpoint, asked, indexes)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            for index in indexes.values():
                index.close()
    baseline = samples[BASELINE_NAME]
    rows = [Row(f"locomo {name} p{q}", percentile(samples[name], q), percentile(baseline, q), "ms",
                BASELINE_NAME, False)
            for name in OPS for q in (50, 99)]
    rows.append(Row("locomo daemon round trip (capabilities) p50", percentile(samples[ROUND_TRIP], 50),
                    percentile(baseline, 50), "ms", BASELINE_NAME, False))
    print(f"{len(conversations)} conversations loaded in {loaded:.1f} s; {len(asked)} questions, "
          "each op once per question through a warm daemon")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
