"""The read ops' own CPU on one LoCoMo store, in process: answers dumped, latency, a profile.

    python -m tools.bench.read_ops build --data ../shared/eval/locomo-dev --store /tmp/locomo-store
    python -m tools.bench.read_ops run --data ../shared/eval/locomo-dev --store /tmp/locomo-store
        [--questions N] [--dump answers.jsonl] [--rounds 1] [--profile out.prof] [--ops search,...]

``build`` loads the conversations the way ``memoree eval`` does (``memoree.admin.locomo``) into
``--store`` once. ``run`` copies that store to a scratch folder (a read never sees another run's
leftovers), opens an in-process service on a fixed clock (every answer is then a function of the
store and the code alone) and asks every selected question through ``context.build`` (2,000 and
6,000 bytes), ``memory.recall`` and ``search`` (limit 10) at the ambient horizon, the ops of the
evaluation. ``--dump`` writes each answer's result JSON (keys sorted), one line per question and
op, so two code versions can be compared byte for byte on the same store; ``--rounds`` asks
everything that many times after one untimed warm-up round (``--warm-up N``: only the first N
questions, as the daemon bench warms up: per-process memories of texts are then not all warm)
and prints p50/p99 per op, of wall time and of the thread's CPU time (``cpu``: what a busy
machine's other work does not add to);
``--profile`` writes a cProfile of the timed rounds. The store's ids are random, so answers are
only comparable between runs over the same built store.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from memoree.admin.eval_client import CLOCK_START, Client, SyntheticClock
from memoree.admin.locomo import LocomoOptions, load_conversation, selected_questions
from memoree.admin.locomo_data import read_dataset
from memoree.eventlog.timefmt import format_instant
from memoree.service.service import Service
from tools.bench.common import percentile

OPS: dict[str, tuple[str, dict]] = {
    "context.build@2000": ("context.build", {"max_bytes": 2000}),
    "context.build@6000": ("context.build", {"max_bytes": 6000}),
    "memory.recall": ("memory.recall", {}),
    "search@10": ("search", {"limit": 10}),
}
FIXED_NOW = format_instant(CLOCK_START.replace(month=6))


def build(data: Path, store: Path) -> None:
    """The evaluation's store of every conversation in ``data``, written to ``store``."""
    if store.exists():
        shutil.rmtree(store)
    service = Service(store, clock=SyntheticClock(), synchronous="OFF")
    try:
        client = Client(service)
        for conversation in read_dataset(data, ()):
            load_conversation(client, conversation)
    finally:
        service.close()


def ask_all(client: Client, asked: list, ops: list[str], dump: list[str] | None,
            times: dict[str, list[float]] | None) -> None:
    """Every question through every op; answers appended to ``dump``, latencies to ``times``."""
    for conversation, question in asked:
        for name in ops:
            op, extra = OPS[name]
            payload = {"query": question.question, "horizon": "ambient", **extra}
            started, cpu = time.perf_counter(), time.thread_time()
            envelope = client.send(op, payload, context=conversation.context)
            elapsed = (time.perf_counter() - started) * 1000
            if times is not None:
                times[name].append(elapsed)
                times[name + " cpu"].append((time.thread_time() - cpu) * 1000)
            if dump is not None:
                body = envelope.get("result") if envelope.get("ok") else {"error": envelope.get("error")}
                dump.append(json.dumps({"conversation": conversation.name, "index": question.index,
                                        "op": name, "result": body}, sort_keys=True, ensure_ascii=False))


def run(args: argparse.Namespace) -> None:
    conversations = read_dataset(args.data, tuple(args.only))
    options = LocomoOptions(questions_per_conversation=args.questions)
    asked = [(c, q) for c in conversations for q in selected_questions(c, options)]
    ops = args.ops.split(",") if args.ops else list(OPS)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "store"
        shutil.copytree(args.store, copy)
        service = Service(copy, clock=lambda: FIXED_NOW, synchronous="OFF")
        client = Client(service)
        try:
            dump: list[str] | None = [] if args.dump else None
            warm = asked if args.dump or args.warm_up is None else asked[:args.warm_up]
            ask_all(client, warm, ops, dump, None)  # warm-up (and the dump: the first answers)
            if args.dump:
                Path(args.dump).write_text("\n".join(dump or []) + "\n", encoding="utf-8")
            times: dict[str, list[float]] = {key: [] for name in ops for key in (name, name + " cpu")}
            profiler = cProfile.Profile() if args.profile else None
            for _ in range(args.rounds):
                if profiler:
                    profiler.enable()
                ask_all(client, asked, ops, None, times)
                if profiler:
                    profiler.disable()
            if profiler:
                profiler.dump_stats(args.profile)
        finally:
            service.close()
    load = os.getloadavg()
    print(f"{len(asked)} questions x {args.rounds} rounds; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for name, samples in times.items():
        if samples:
            print(f"{name:<24} p50 {percentile(samples, 50):7.2f} ms  p99 {percentile(samples, 99):7.2f} ms"
                  f"  mean {sum(samples) / len(samples):7.2f} ms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "run"))
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format folder")
    parser.add_argument("--store", type=Path, required=True, help="the built store's folder")
    parser.add_argument("--only", action="append", default=[], help="only this conversation (repeatable)")
    parser.add_argument("--questions", type=int, default=None, help="the first N questions of each conversation")
    parser.add_argument("--dump", type=Path, default=None, help="write every answer here (JSON lines)")
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds after the warm-up")
    parser.add_argument("--warm-up", type=int, default=None,
                        help="questions asked before timing (default: every one; a dump asks every one)")
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of the timed rounds")
    parser.add_argument("--ops", default="", help="comma-separated op names (default: all four)")
    args = parser.parse_args(argv)
    if args.action == "build":
        build(args.data, args.store)
    else:
        run(args)


if __name__ == "__main__":
    main()
