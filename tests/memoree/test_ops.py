"""Each op is declared once (``memoree.protocol.ops``), and every surface shows exactly the declared ops."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from memoree.agents.mcp_server import build_tools
from memoree.cli.app import app
from memoree.client.call import LONG_RUNNING_OPS
from memoree.client.context import CONTEXT_FREE_OPS
from memoree.commands.handler import COMMANDS
from memoree.projections.idempotency import OP_FOR_EVENT, RESULT_BUILDERS
from memoree.protocol.ops import OPS, OpSpec, cli_ops, mcp_ops
from memoree.protocol.results import RESULT_TYPES
from memoree.service import discovery, readers


def _commands(typer_app: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every CLI command path and the function behind it."""
    for info in typer_app.registered_commands:
        yield (*prefix, info.name or info.callback.__name__.replace("_", "-")), info.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, (*prefix, group.name))


def _sent_ops(function: Any) -> set[str]:
    """The ops a CLI command sends through the request wrapper ``send``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "send"
            and node.args and isinstance(node.args[0], ast.Constant)}


class TestEverySurfaceShowsTheDeclaredOps:
    def test_capabilities_list_exactly_the_declared_ops(self) -> None:
        """capabilities names every declared op once, in declaration order, with its declared class."""
        entries = discovery.capabilities(OPS)["operations"]
        assert list(OPS) == [entry["operation"] for entry in entries]
        for entry in entries:
            spec = OPS[entry["operation"]]
            assert (spec.mutating, spec.needs_context, spec.horizon) == (
                entry["mutating"], entry["needs_context"], entry["supports_explicit_horizon"])

    def test_schema_has_every_declared_input_and_result(self) -> None:
        """schema's operation inputs are the declared ops; its result types are the declared results."""
        bundle = discovery.schema_bundle(OPS)
        assert set(OPS) == set(bundle["operation_inputs"])
        assert {name for name, spec in OPS.items() if spec.result} == set(bundle["result_types"])
        for name, spec in OPS.items():
            if spec.result:
                assert bundle["result_types"][name]["$ref"].endswith(spec.result)

    def test_instructions_list_exactly_the_declared_ops(self) -> None:
        """The agent instructions have one operation line per declared op and no other."""
        text = discovery.instructions(OPS, "markdown")["content"]
        listed = [line.split("`")[1] for line in text.splitlines() if line.startswith("- `") and "input:" in line]
        assert list(OPS) == listed

    def test_mcp_tools_are_exactly_the_exposed_ops(self) -> None:
        """The MCP tool list is the ops whose declaration exposes them, in rank order, with their summaries."""
        tools = build_tools()
        exposed = mcp_ops()
        assert [spec.tool_name for spec in exposed] == [tool.name for tool in tools]
        assert [spec.tool_description for spec in exposed] == [tool.description for tool in tools]
        assert [spec.mcp.rank for spec in exposed if spec.mcp] == sorted({s.mcp.rank for s in exposed if s.mcp})
        for tool in tools:
            assert (OPS[tool.op].mutating, OPS[tool.op].mcp.title) == (tool.mutating, tool.title)

    def test_cli_commands_send_exactly_the_declared_ops(self) -> None:
        """Each declared CLI path is a command that sends its op, and no other command sends an op."""
        sent = {path: _sent_ops(function) for path, function in _commands(app)}
        assert {path: {spec.name} for path, spec in cli_ops().items()} == {
            path: ops for path, ops in sent.items() if ops}


class TestWhatServesEachOp:
    def test_every_mutation_has_its_command_and_nothing_else_does(self) -> None:
        """The command handler serves exactly the declared mutations."""
        assert {name for name, spec in OPS.items() if spec.mutating} == set(COMMANDS)

    def test_every_read_has_a_reader_and_every_reader_serves_one_op(self) -> None:
        """Each read is served by a function of memoree.service.readers, and none is left over."""
        served = [spec.reader for spec in OPS.values() if spec.reader is not None]
        assert all(reader.__module__ == readers.__name__ for reader in served)
        assert len(served) == len(set(served))
        public = {getattr(readers, name) for name in readers.__all__} - {readers.read_scope}
        assert set(served) == public

    def test_idempotency_records_follow_the_declared_events(self) -> None:
        """The idempotency projection records a result for exactly the events the mutations declare
        (an event two ops append, such as artifact.revised by revise and append, is named after one of them)."""
        declared = {event for spec in OPS.values() for event in spec.events}
        assert declared == set(OP_FOR_EVENT) == set(RESULT_BUILDERS)
        assert all(event in OPS[op].events for event, op in OP_FOR_EVENT.items())

    def test_every_declared_result_type_exists(self) -> None:
        """A declaration names a result type the catalogue has, and every catalogued type is used."""
        named = {spec.result for spec in OPS.values() if spec.result}
        assert named == set(RESULT_TYPES)
        assert all(issubclass(RESULT_TYPES[name], msgspec.Struct) for name in named)

    def test_the_lean_client_lists_agree_with_the_declarations(self) -> None:
        """The stdlib-only client's own op lists (long-running, context-free) match the declarations."""
        assert {name for name, spec in OPS.items() if spec.long_running} == LONG_RUNNING_OPS
        assert CONTEXT_FREE_OPS <= {name for name, spec in OPS.items() if not spec.needs_context}


class TestTheDeclaration:
    def test_a_read_with_no_reader_is_refused(self) -> None:
        """A declaration that neither mutates nor names a reader cannot be built."""
        with pytest.raises(TypeError):
            OpSpec("nothing.serves", OPS["doctor"].input_type, "served by nobody")

    def test_a_mutation_must_name_its_events(self) -> None:
        """A mutation declares the event types it appends (the idempotency records follow them)."""
        with pytest.raises(TypeError):
            OpSpec("thing.put", OPS["artifact.put"].input_type, "writes", mutating=True)
