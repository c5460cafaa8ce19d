"""``memoree mcp``: protocol ops as MCP tools over stdio, spoken to with the official SDK client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from memoree.client.transport import Endpoint, probe
from memoree.agents.mcp_server import AGENT_OPS, build_tools, derived_tool_key, input_schema, tool_request
from memoree.protocol.ops import OPS
from tests.agent.conftest import CTX, MEMOREE, Cli

TEXT = "SQLite is authoritative; the filesystem CAS stores blobs."


def run_client(env: dict[str, str], cwd: Path, script: Callable[[Any], Awaitable[Any]]) -> Any:
    """Start `memoree mcp` as a subprocess, open an SDK client session on it and run ``script``."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[*MEMOREE[1:], "mcp"], env=env, cwd=str(cwd))

    async def main() -> Any:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await script(session)

    return anyio.run(main)


def envelope_of(result: Any) -> dict[str, Any]:
    envelope = result.structured_content
    assert envelope == json.loads(result.content[0].text)
    assert result.is_error is (not envelope["ok"])
    return envelope


def server_env(cli: Cli, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in cli.env.items() if k.startswith("MEMOREE_")}
    env.update(extra)
    return env


async def store_and_read_back(session: Any) -> dict[str, Any]:
    """List tools, put an artifact, assert a claim citing its bytes, retry the put, read the claim back."""
    names = [tool.name for tool in (await session.list_tools()).tools]
    put_args = {"kind": "decision", "title": "Storage design", "content": {"type": "text", "data": TEXT}}
    put = envelope_of(await session.call_tool("artifact_put", put_args))
    art = put["result"]
    evidence = [{"artifact_id": art["artifact_id"], "revision_id": art["revision_id"], "start_byte": 0, "end_byte": 23}]
    claim = envelope_of(await session.call_tool("claim_assert", {
        "claim_type": "decision", "statement": "SQLite is the authoritative store.", "evidence": evidence,
        "idempotency_key": "storage:sqlite-claim"}))
    retry = envelope_of(await session.call_tool("artifact_put", put_args))
    if "memory_recall" in names:
        read = envelope_of(await session.call_tool("memory_recall", {"query": "authoritative store SQLite"}))
    else:
        read = envelope_of(await session.call_tool("claim_get", {"claim_id": claim["result"]["claim_id"]}))
    bad = await session.call_tool("artifact_put", {"kind": "x"})
    return {"names": names, "put": put, "claim": claim, "retry": retry, "read": read, "bad": bad}


class TestToolCatalogue:
    def test_tools_follow_the_registry(self) -> None:
        """Only agent ops registered in OPS become tools, named with _ for ., in AGENT_OPS order."""
        subset = {name: OPS[name] for name in ("claim.get", "artifact.put", "doctor")}
        assert ["artifact_put", "claim_get"] == [t.name for t in build_tools(subset)]
        expected = [op.replace(".", "_") for op in AGENT_OPS if op in OPS]
        assert expected == [t.name for t in build_tools()]

    def test_input_schemas_come_from_the_msgspec_types(self) -> None:
        """A tool's schema is the op's msgspec schema with its root inlined, plus idempotency_key for mutations."""
        generated = msgspec.json.schema(OPS["claim.assert"].input_type)
        schema = input_schema(OPS["claim.assert"].input_type, mutating=True)
        root = generated["$defs"]["ClaimAssertInput"]
        assert ("object", False, root["required"]) == (schema["type"], schema["additionalProperties"], schema["required"])
        assert set(root["properties"]) | {"idempotency_key"} == set(schema["properties"])
        assert schema["$defs"]["EvidenceLocator"] == generated["$defs"]["EvidenceLocator"]
        assert "idempotency_key" not in input_schema(OPS["claim.get"].input_type, mutating=False)["properties"]

    def test_mutation_keys_are_derived_unless_given(self) -> None:
        """Without idempotency_key the key derives from op and arguments; a given key is used as is."""
        (put,) = [t for t in build_tools() if t.op == "artifact.put"]
        args = {"kind": "k", "title": "t", "content": {"type": "text", "data": "x"}}
        first, second = tool_request(put, args), tool_request(put, dict(reversed(list(args.items()))))
        assert first["idempotency_key"] == second["idempotency_key"] == derived_tool_key("artifact.put", args)
        assert first["idempotency_key"].startswith("mcp_")
        explicit = tool_request(put, {**args, "idempotency_key": "mine"})
        assert ("mine", args) == (explicit["idempotency_key"], explicit["input"])


class TestMcpServer:
    def test_store_assert_and_read_back_in_process(self, cli: Cli) -> None:
        """Over stdio: list tools, store an artifact, assert a cited claim, replay a retry, read the claim back."""
        outcome = run_client(server_env(cli), cli.cwd, store_and_read_back)
        expected = [op.replace(".", "_") for op in AGENT_OPS if op in OPS]
        assert expected == outcome["names"]
        put, claim, retry, read = outcome["put"], outcome["claim"], outcome["retry"], outcome["read"]
        assert (True, 1, True) == (put["ok"], put["commit_seq"], put["result"]["created"])
        assert (2, False, 1) == (claim["commit_seq"], retry["result"]["created"], retry["commit_seq"])
        assert claim["result"]["claim_id"] in json.dumps(read["result"])
        assert outcome["bad"].is_error and "INVALID_REQUEST" in outcome["bad"].content[0].text
        assert 2 == cli.head()

    def test_requests_go_to_the_daemon_by_default(self, cli: Cli, tmp_path: Path) -> None:
        """Without in-process mode the tools talk to the daemon at MEMOREE_ENDPOINT, like memoree call."""
        sock, data = tmp_path / "run" / "d.sock", cli.home / "data"
        env = {k: v for k, v in cli.env.items() if k != "MEMOREE_IN_PROCESS"}
        daemon = subprocess.Popen([*MEMOREE, "serve", "--listen", f"unix://{sock}", "--data-dir", str(data)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            endpoint = Endpoint("unix", str(sock))
            deadline = time.monotonic() + 30
            while probe(endpoint) is None:
                assert daemon.poll() is None and time.monotonic() < deadline, "daemon did not start"
                time.sleep(0.05)
            outcome = run_client({**server_env(cli), "MEMOREE_IN_PROCESS": "", "MEMOREE_ENDPOINT": f"unix://{sock}"},
                                 cli.cwd, store_and_read_back)
            assert (True, True) == (outcome["put"]["ok"], outcome["claim"]["ok"])
            assert {**CTX, "pins": []}.items() <= outcome["put"]["context"].items()
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(15)
        assert 2 == cli.head()


@pytest.mark.parametrize("module", ["memoree.cli.app", "memoree.client.call"])
def test_the_sdk_is_imported_only_by_the_mcp_command(module: str) -> None:
    """Loading the CLI or the call path never imports the MCP SDK."""
    code = f"import sys, {module}; print('mcp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "False" == result.stdout.strip(), result.stderr
