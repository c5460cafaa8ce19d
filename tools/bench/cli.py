"""Start-up of typer commands: the wall time of one ``memoree`` command line, as a user runs it.

    python -m tools.bench.cli [--runs 15] [--store 200] [--quick]

Rows: ``memoree search --help``, ``memoree --help``, a real ``memoree search``, a
``memoree artifact put`` and a ``memoree call capabilities`` (the lean path agents use) through a
warm daemon, and ``memoree search --in-process`` (the fallback that opens the store itself), each
against ``python -c pass`` measured in the same run.
Every command runs inside an initialized project (``memoree init``, so the context comes from
its marker) with a daemon holding ``--store`` varied notes. The commands run round-robin, one
of each per round, so a busy machine slows them all alike; each figure is the median over
``--runs`` rounds. The console script is the one next to this interpreter (``python -m memoree``
where there is none). Before the table, one ``python -X importtime`` run of each command says
how many modules it imports and which heavy ones (pydantic, rich, numpy, the embedding model,
SQLite) are among them, and after it a line gives each command's CPU time (user + system, the
steadier figure on a shared machine) against the baseline's. A first line says how memoree is
installed: an editable install runs its import hook (a ``.pth`` file) at every start, baseline
included, and with ``PYTHONDONTWRITEBYTECODE`` set its source keeps no ``__pycache__``, so every
command compiles each memoree module it imports again.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from memoree.client.transport import Endpoint, exchange
from tools.bench.common import Row, median, print_table, timed
from tools.bench.daemon import start_daemon, varied_texts

CAPABILITIES = b'{"request_id":"bench","op":"capabilities","input":{}}'
HEAVY = ("pydantic", "rich", "numpy", "wordllama", "tokenizers", "safetensors", "sqlite3", "msgspec")


INSTALL_PROBE = """if True:
    import importlib.util, json, os, sys
    import memoree.client.call as call
    print(json.dumps({"editable": any(name.startswith("__editable__") for name in sys.modules),
                      "cached": os.path.exists(importlib.util.cache_from_source(call.__file__))}))
"""


def install_note(env: dict[str, str], cwd: Path) -> str:
    """How the commands' memoree is installed (editable or not) and whether its bytecode is cached,
    as a process started like them (same interpreter, environment and folder) sees it."""
    probe = subprocess.run([sys.executable, "-c", INSTALL_PROBE], env=env, cwd=cwd, capture_output=True, check=True)
    seen = json.loads(probe.stdout)
    install = "editable (its import hook loads at every start, python -c pass's too)" if seen["editable"] \
        else "not editable"
    bytecode = "yes" if seen["cached"] else "no (each start compiles the memoree modules it imports)"
    return (f"memoree installed: {install}; PYTHONDONTWRITEBYTECODE={env.get('PYTHONDONTWRITEBYTECODE') or '(unset)'}; "
            f"bytecode of memoree.client.call cached: {bytecode}")


def memoree_command() -> list[str]:
    script = Path(sys.executable).with_name("memoree")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memoree"]


def imported_modules(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes) -> list[str]:
    """The modules ``argv`` imports, from one ``python -X importtime`` run."""
    command = [sys.executable, "-X", "importtime", *argv[1:]] if argv[0] == sys.executable else \
        [sys.executable, "-X", "importtime", argv[0], *argv[1:]]
    result = subprocess.run(command, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    return [line.rsplit("|", 1)[1].strip() for line in result.stderr.decode().splitlines()
            if line.startswith("import time:") and "|" in line and not line.endswith("| package")]


def fill(endpoint: Endpoint, context: dict[str, str], texts: list[str]) -> None:
    """Store ``texts`` as notes of the project ``context`` through ``batch`` requests (untimed)."""
    for start in range(0, len(texts), 250):
        requests = [{"v": 1, "request_id": f"f{start + i}", "op": "artifact.put", "idempotency_key": f"fill{start + i}",
                     "context": context, "input": {"kind": "note", "title": f"note {start + i}",
                                                   "content": {"type": "text", "data": text}}}
                    for i, text in enumerate(texts[start:start + 250])]
        reply = exchange(endpoint, json.dumps({"v": 1, "request_id": "fill", "op": "batch",
                                               "input": {"requests": requests}}).encode())
        if b'"ok":true' not in reply[:200]:
            raise RuntimeError(f"filling the store failed: {reply[:300]!r}")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def round_robin(commands: dict[str, tuple[list[str], bytes]], runs: int, env: dict[str, str],
                cwd: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall seconds and median CPU seconds (user + system) of each command, one run of
    each per round. CPU time is the steadier figure on a shared machine."""
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (argv, stdin) in commands.items():
            def once() -> None:
                result = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
                if result.returncode != 0:
                    raise RuntimeError(f"{name} failed ({result.returncode}): {result.stderr[-400:]!r}")
            before = children_cpu()
            wall[name].append(timed(once))
            cpu[name].append(children_cpu() - before)
    return ({name: median(values) for name, values in wall.items()},
            {name: median(values) for name, values in cpu.items()})


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (each runs every command once)")
    parser.add_argument("--store", type=int, default=200, help="notes in the daemon's store")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.store = 3, 20
    memoree = memoree_command()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        project = folder / "project"
        project.mkdir()
        proc, endpoint = start_daemon(folder)
        try:
            env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMOREE_")},
                   "MEMOREE_HOME": str(folder / "home"), "MEMOREE_ENDPOINT": str(endpoint)}
            marker = json.loads(subprocess.run([*memoree, "init"], env=env, cwd=project, capture_output=True,
                                               check=True).stdout)["result"]
            texts = varied_texts(args.store)
            fill(endpoint, {"workspace_id": marker["workspace_id"], "project_id": marker["project_id"]}, texts)
            query = " ".join(texts[0].split()[:2])
            inproc_env = {**env, "MEMOREE_DATA_DIR": str(folder / "inproc-data")}
            for text in texts[:3]:  # the fallback's store: created, with a few of the same notes
                subprocess.run([*memoree, "--in-process", "artifact", "put", "-", "--title", "seed"],
                               input=text.encode(), env=inproc_env, cwd=project, capture_output=True, check=True)
            note = b"a note about the bench of command start"
            commands = {
                "python -c pass": ([sys.executable, "-c", "pass"], b""),
                "memoree search --help": ([*memoree, "search", "--help"], b""),
                "memoree --help": ([*memoree, "--help"], b""),
                "memoree search, warm daemon": ([*memoree, "search", query], b""),
                "memoree artifact put, warm daemon": ([*memoree, "artifact", "put", "-", "--title", "n"], note),
                "memoree call capabilities, warm daemon": ([*memoree, "call"], CAPABILITIES),
            }
            print(install_note(env, project))
            for name, (command, stdin) in commands.items():
                if name.startswith("memoree"):
                    modules = imported_modules(command, env, project, stdin)
                    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
                    print(f"{name}: {len(modules)} modules imported; heavy: {', '.join(heavy) or 'none'}")
            seconds, cpu = round_robin(commands, args.runs, env, project)
            inproc = {"python -c pass": commands["python -c pass"],
                      "memoree search --in-process": ([*memoree, "--in-process", "search", query], b"")}
            modules = imported_modules(inproc["memoree search --in-process"][0], inproc_env, project, b"")
            heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
            print(f"memoree search --in-process: {len(modules)} modules imported; heavy: {', '.join(heavy) or 'none'}")
            inproc_seconds, inproc_cpu = round_robin(inproc, args.runs, inproc_env, project)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    cpu["memoree search --in-process"] = inproc_cpu["memoree search --in-process"]
    base_cpu = cpu.pop("python -c pass")
    print("CPU (user + system, median): python -c pass " + f"{base_cpu * 1000:.0f} ms; " + "; ".join(
        f"{name} {value * 1000:.0f} ms ({value / base_cpu:.1f}x)" for name, value in cpu.items()))
    baseline = seconds.pop("python -c pass")
    rows = [Row(name, value * 1000, baseline * 1000, "ms", "python -c pass", False) for name, value in seconds.items()]
    rows.append(Row("memoree search --in-process", inproc_seconds["memoree search --in-process"] * 1000,
                    inproc_seconds["python -c pass"] * 1000, "ms", "python -c pass", False))
    print(f"(commands: {' '.join(memoree)} ...; median of {args.runs} rounds; "
          f"import set: {json.dumps(HEAVY)})")
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
