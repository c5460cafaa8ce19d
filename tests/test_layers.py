"""Layers import downward only, and no module takes part in an import cycle (see ``tests/layering``)."""

from __future__ import annotations

from tests.layering import cycles, import_graph, layer_of, read_sources, upward_imports


def test_every_import_points_down() -> None:
    """No module of memoree imports a module of a higher layer, or commands and queries each other."""
    assert upward_imports(import_graph(read_sources())) == []


def test_no_import_cycle() -> None:
    """The module import graph (imports inside functions included) has no cycle."""
    assert cycles(import_graph(read_sources())) == []


def test_the_check_sees_the_whole_tree() -> None:
    """Every layer is read and its imports are found, so an empty result means something."""
    graph = import_graph(read_sources())
    assert {layer_of(m) for m in graph} == {"kernel", "eventlog", "projections", "commands", "queries", "front door"}
    assert "memoree.eventlog.store" in graph["memoree.commands.handler"]
    assert "memoree.service.engine" in graph["memoree.service.service"]


def test_a_planted_upward_import_fails_the_check() -> None:
    """An eventlog module importing the front door, even inside a function, is reported."""
    sources = read_sources()
    sources["memoree.eventlog.planted"] = (
        "def open_it():\n    from memoree.service.engine import Engine\n    return Engine\n")
    assert upward_imports(import_graph(sources)) == [
        "memoree.eventlog.planted (eventlog) imports memoree.service.engine (front door)"]


def test_commands_and_queries_may_not_import_each_other() -> None:
    """A sideways import between the two sibling layers is reported like an upward one."""
    sources = read_sources()
    sources["memoree.commands.planted"] = "from memoree.queries.search import search\n"
    assert upward_imports(import_graph(sources)) == [
        "memoree.commands.planted (commands) imports memoree.queries.search (queries)"]


def test_imports_only_for_type_checkers_do_not_count() -> None:
    """An import under ``if TYPE_CHECKING:`` never runs, so it is not an edge of the graph."""
    sources = read_sources()
    sources["memoree.eventlog.planted"] = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memoree.service.engine import Engine\n")
    assert "memoree.service.engine" not in import_graph(sources)["memoree.eventlog.planted"]


def test_a_planted_cycle_fails_the_check() -> None:
    """Two front-door modules importing each other (one lazily) form a reported cycle."""
    sources = read_sources()
    sources["memoree.cli.planted_a"] = "from memoree.cli import planted_b\n"
    sources["memoree.cli.planted_b"] = "def later():\n    from memoree.cli import planted_a\n"
    assert cycles(import_graph(sources)) == [["memoree.cli.planted_a", "memoree.cli.planted_b"]]


def test_no_front_door_module_is_over_600_lines() -> None:
    """Every module of the front door (memoree/) stays small enough to read: 600 lines at most."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "memoree"
    long = {str(path.relative_to(root)): n for path in root.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}
