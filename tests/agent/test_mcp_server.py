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
from memoree.agents.mcp_summary import summarize
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
    assert result.is_error is (not envelope["ok"])
    assert len(result.content[0].text) < 2000 and not result.content[0].text.startswith("{")
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
        schema = input_schema(OPS["claim.assert"].input_type, mutating=True, op="claim.assert")
        root = generated["$defs"]["ClaimAssertInput"]
        assert ("object", False, root["required"]) == (schema["type"], schema["additionalProperties"], schema["required"])
        assert set(root["properties"]) | {"idempotency_key"} == set(schema["properties"])
        locator = schema["$defs"]["EvidenceLocator"]
        assert generated["$defs"]["EvidenceLocator"]["required"] == locator["required"]
        assert {name: prop.get("type") for name, prop in generated["$defs"]["EvidenceLocator"]["properties"].items()} == {
            name: prop.get("type") for name, prop in locator["properties"].items()}
        assert "idempotency_key" not in input_schema(OPS["claim.get"].input_type, mutating=False)["properties"]

    def test_content_is_an_object_and_a_string_is_text(self) -> None:
        """content is typed object (generic clients send an object); a plain string is taken as text."""
        (put,) = [t for t in build_tools() if t.op == "artifact.put"]
        assert "object" == put.input_schema["properties"]["content"]["type"]
        request = tool_request(put, {"kind": "k", "title": "t", "content": "plain words"})
        assert {"type": "text", "data": "plain words"} == request["input"]["content"]

    def test_summaries_are_short_and_not_the_json_again(self) -> None:
        """The text content names the outcome in a few lines; errors give code, message and hint."""
        envelope = {"ok": True, "commit_seq": 3, "result": {"artifact_id": "art_1", "revision_id": "arev_1", "created": True}}
        assert "artifact.put done at commit_seq 3: art_1 arev_1." == summarize("artifact.put", envelope)
        hits = {"ok": True, "result": {"claims": [{"statement": "SQLite is authoritative", "status": "active",
                                                   "claim_id": "clm_1"}]}}
        assert "memory.recall: 1 claims.\n- SQLite is authoritative [active] (clm_1)" == summarize("memory.recall", hits)
        failed = {"ok": False, "error": {"code": "NOT_FOUND", "message": "not found: artifact x", "hint": "h"}}
        assert "NOT_FOUND: not found: artifact x Hint: h" == summarize("artifact.get", failed)

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
        assert outcome["bad"].is_error and outcome["bad"].content[0].text.startswith("INVALID_REQUEST")
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


def project_server(cli: Cli) -> tuple[dict[str, str], Path, Path]:
    """An initialized project, and a host folder without a marker to start the server from."""
    project, host = cli.root / "project", cli.root / "host"
    project.mkdir()
    host.mkdir()
    env = {k: v for k, v in server_env(cli).items() if k != "MEMOREE_CONTEXT"}
    subprocess.run([*MEMOREE, "init", "--directory", str(project)], env=env, cwd=project, check=True,
                   capture_output=True, timeout=60)
    return env, project, host


def run_in(env: dict[str, str], cwd: Path, args: list[str], script: Callable[[Any], Awaitable[Any]]) -> Any:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[*MEMOREE[1:], "mcp", *args], env=env, cwd=str(cwd))

    async def main() -> Any:
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await script(session)

    return anyio.run(main)


def properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every parameter of a schema: the root's and those of its nested object types."""
    found = list(schema.get("properties", {}).items())
    for nested in schema.get("$defs", {}).values():
        found += list(nested.get("properties", {}).items())
    return found


def bounded(prop: dict[str, Any], key: str) -> Any:
    return next((b[key] for b in prop.get("anyOf", [prop]) if key in b), None)


class TestMcpForHosts:
    def test_every_tool_is_described_bounded_and_typed_from_a_folder_without_a_marker(self, cli: Cli) -> None:
        """Started elsewhere with --project: titles, hints, output schemas, described and bounded parameters."""
        env, project, host = project_server(cli)

        async def script(session: Any) -> Any:
            listed = (await session.list_tools()).tools
            put = await session.call_tool("artifact_put", {"kind": "note", "title": "Design",
                                                           "content": "SQLite is authoritative."})
            found = await session.call_tool("artifact_list", {"title": "Design"})
            too_many = await session.call_tool("search", {"query": "SQLite", "limit": 101})
            most = await session.call_tool("search", {"query": "SQLite", "limit": 100})
            recall_over = await session.call_tool("memory_recall", {"query": "SQLite", "max_claims": 11})
            recall_max = await session.call_tool("memory_recall", {"query": "SQLite", "max_claims": 10})
            context = await session.call_tool("context_resolve", {})
            return listed, put, found, (too_many, most, recall_over, recall_max), context

        listed, put, found, limits_calls, context = run_in(env, host, ["--project", str(project)], script)
        assert [op.replace(".", "_") for op in AGENT_OPS if op in OPS] == [t.name for t in listed]
        for tool in listed:
            hints = tool.annotations
            op = next(op for op in AGENT_OPS if op.replace(".", "_") == tool.name)
            declared = OPS[op].mcp.hints
            assert tool.title == OPS[op].mcp.title
            assert (declared.read_only, declared.destructive, declared.idempotent, declared.open_world) == (
                hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint), tool.name
            assert not (OPS[op].mutating and hints.read_only_hint), tool.name
            assert {"v", "request_id", "ok"} == set(tool.output_schema["required"]), tool.name
            undescribed = [name for name, prop in properties(tool.input_schema) if not prop.get("description")]
            assert [] == undescribed, tool.name
            for name, prop in properties(tool.input_schema):
                if name == "limit" or name.startswith("max_"):
                    assert bounded(prop, "maximum") is not None, (tool.name, name)
        from jsonschema import Draft202012Validator

        for tool in listed:
            Draft202012Validator.check_schema(tool.input_schema)
            Draft202012Validator.check_schema(tool.output_schema)
        destructive = {t.name for t in listed if t.annotations.destructive_hint}
        assert {"artifact_forget", "artifact_purge", "claim_retract", "batch"} <= destructive
        assert "artifact_put" not in destructive
        assert (False, True) == (put.is_error, put.structured_content["result"]["created"])
        assert [put.structured_content["result"]["artifact_id"]] == [
            a["artifact_id"] for a in found.structured_content["result"]["artifacts"]]
        too_many, most, recall_over, recall_max = limits_calls
        assert (True, False, True, False) == (too_many.is_error, most.is_error, recall_over.is_error, recall_max.is_error)
        marker = (project / ".memoree.toml").read_text()
        assert context.structured_content["result"]["context"]["project_id"] in marker

    def test_without_any_context_the_tool_error_names_the_settings(self, cli: Cli) -> None:
        """No marker, no variable, no roots: NO_AMBIENT_CONTEXT with a hint naming --project, --context, MEMOREE_CONTEXT."""
        env, _, host = project_server(cli)

        async def script(session: Any) -> Any:
            return await session.call_tool("memory_recall", {"query": "anything"})

        result = run_in(env, host, [], script)
        text = result.content[0].text
        assert result.is_error and text.startswith("NO_AMBIENT_CONTEXT")
        assert all(name in text for name in ("--project", "--context", "MEMOREE_CONTEXT", ".memoree.toml"))

    def test_the_first_root_with_a_marker_gives_the_context(self, cli: Cli) -> None:
        """A client offering roots: the server adopts the project of the first root that has a marker."""
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        import mcp.types as types

        env, project, host = project_server(cli)

        async def roots(ctx: Any) -> Any:
            return types.ListRootsResult(roots=[types.Root(uri=host.as_uri()), types.Root(uri=project.as_uri())])

        async def main() -> Any:
            params = StdioServerParameters(command=sys.executable, args=[*MEMOREE[1:], "mcp"], env=env, cwd=str(host))
            with anyio.fail_after(120):
                async with stdio_client(params) as (read, write), ClientSession(read, write, list_roots_callback=roots) as session:
                    await session.initialize()
                    return await session.call_tool("context_resolve", {})

        result = anyio.run(main)
        assert not result.is_error, result.content[0].text
        assert result.structured_content["result"]["context"]["project_id"] in (project / ".memoree.toml").read_text()

    def test_resources_and_prompts(self, cli: Cli) -> None:
        """resources/list shows recent items; an artifact reads by id; both prompts expand with their argument."""
        env, project, host = project_server(cli)

        async def script(session: Any) -> Any:
            put = await session.call_tool("artifact_put", {"kind": "note", "title": "Runbook", "content": "restart the daemon"})
            art = put.structured_content["result"]["artifact_id"]
            resources = (await session.list_resources()).resources
            templates = (await session.list_resource_templates()).resource_templates
            recent = await session.read_resource("memoree://recent")
            one = await session.read_resource(f"memoree://artifact/{art}")
            prompts = (await session.list_prompts()).prompts
            recall = await session.get_prompt("recall-before-answering", {"question": "how to restart?"})
            remember = await session.get_prompt("remember-this", {"text": "the port is 7717"})
            return art, resources, templates, recent, one, prompts, recall, remember

        art, resources, templates, recent, one, prompts, recall, remember = run_in(
            env, host, ["--project", str(project)], script)
        assert ["memoree://recent"] == [str(r.uri) for r in resources]
        assert ["memoree://artifact/{artifact_id}"] == [t.uri_template for t in templates]
        assert "Runbook" in recent.contents[0].text and art in recent.contents[0].text
        assert "restart the daemon" == one.contents[0].text
        assert {"recall-before-answering", "remember-this"} == {p.name for p in prompts}
        assert "how to restart?" in recall.messages[0].content.text and "memory_recall" in recall.messages[0].content.text
        assert "the port is 7717" in remember.messages[0].content.text


def test_structured_content_matches_each_tools_output_schema(call: Any) -> None:
    """Real success envelopes of every kind of tool validate against that tool's outputSchema."""
    from jsonschema import Draft202012Validator

    from memoree.agents.mcp_server import output_schema

    art = call.ok("artifact.put", {"kind": "note", "title": "t", "content": {"type": "text", "data": "SQLite is authoritative"}},
                  key="p")["result"]
    evidence = [{"artifact_id": art["artifact_id"], "revision_id": art["revision_id"], "start_byte": 0, "end_byte": 6}]
    claim = call.ok("claim.assert", {"claim_type": "fact", "statement": "SQLite is authoritative", "evidence": evidence},
                    key="c")["result"]
    other = call.ok("claim.assert", {"claim_type": "fact", "statement": "Postgres is authoritative"}, key="o")["result"]
    appended = call.ok("artifact.append", {"artifact_id": art["artifact_id"], "if_revision": art["revision_id"],
                                           "content": {"type": "text", "data": "."}}, key="a")
    edge = {"source_type": "claim", "source_id": claim["claim_id"], "relation": "contradicts",
            "target_type": "claim", "target_id": other["claim_id"]}
    envelopes = {
        "artifact.append": appended,
        "relation.put": call.ok("relation.put", edge, key="r"),
        "batch": call.ok("batch", {"requests": [{"v": 1, "request_id": "req_b", "op": "artifact.put", "idempotency_key": "b",
                                                 "context": {**CTX, "pins": []},
                                                 "input": {"kind": "n", "title": "b", "content": {"type": "text", "data": "x"}}}]},
                         context=None),
        "artifact.get": call.ok("artifact.get", {"artifact_id": art["artifact_id"]}),
        "artifact.history": call.ok("artifact.history", {"artifact_id": art["artifact_id"]}),
        "artifact.list": call.ok("artifact.list", {}),
        "claim.get": call.ok("claim.get", {"claim_id": claim["claim_id"]}),
        "claim.list": call.ok("claim.list", {}),
        "claim.history": call.ok("claim.history", {"claim_id": claim["claim_id"]}),
        "relation.list": call.ok("relation.list", {"entity_type": "claim", "entity_id": claim["claim_id"]}),
        "conflict.list": call.ok("conflict.list", {}),
        "search": call.ok("search", {"query": "SQLite authoritative"}),
        "memory.recall": call.ok("memory.recall", {"query": "SQLite authoritative"}),
        "memory.retrieve": call.ok("memory.retrieve", {"query": "SQLite authoritative"}),
        "memory.probe": call.ok("memory.probe", {"query": "SQLite authoritative"}),
        "context.build": call.ok("context.build", {"query": "SQLite authoritative"}),
        "context.resolve": call.ok("context.resolve", {}),
    }
    for op, envelope in envelopes.items():
        errors = [e.message for e in Draft202012Validator(output_schema(OPS[op])).iter_errors(envelope)]
        assert [] == errors, op


class TestStrictJson:
    """A JSON-RPC line that repeats a key is refused, not read as "last one wins"."""

    def test_a_tools_call_with_a_repeated_key_is_invalid_request(self, cli: Cli) -> None:
        """`artifact_put` whose arguments name `title` twice: an INVALID_REQUEST tool error under the
        same id, nothing stored; a repeated key in another request gets a JSON-RPC error."""
        env = cli.env
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
        text = "".join(json.dumps(line) + "\n" for line in lines)
        text += ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"artifact_put","arguments":'
                 '{"kind":"note","title":"a","title":"b","content":{"type":"text","data":"dup"}}}}\n')
        text += '{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"ping"}\n'
        proc = subprocess.Popen([sys.executable, *MEMOREE[1:], "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, cwd=str(cli.cwd))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(text.encode())
        proc.stdin.flush()
        answers: dict[Any, dict[str, Any]] = {}
        deadline = time.monotonic() + 60
        while not {2, 3} <= set(answers) and time.monotonic() < deadline:  # stdin stays open meanwhile
            line = proc.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            answers[message.get("id")] = message
        proc.stdin.close()
        proc.wait(30)
        stderr = proc.stderr.read() if proc.stderr else b""
        tool = answers[2]["result"]
        assert tool["isError"] and tool["structuredContent"]["error"]["code"] == "INVALID_REQUEST"
        assert "duplicate key 'title'" in tool["structuredContent"]["error"]["message"]
        assert "error" in answers[3]
        assert b"Traceback" not in stderr, stderr[-2000:]
