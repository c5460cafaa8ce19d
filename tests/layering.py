"""The layering rule as code: every memoree import, read from the AST, must point down.

Layers, bottom to top: the kernel (``memoree``'s own root modules that every layer may use, and
the fact plane's pure vocabulary), ``eventlog``, ``projections``, then ``commands`` and
``queries`` side by side (neither imports the other), then the front door (every other module of
``memoree``). A module may import its own layer or a lower one. Every import counts, including
those inside functions, and the module graph must have no cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["KERNEL", "LAYER_RANKS", "SOURCE_ROOTS", "cycles", "import_graph", "layer_of", "read_sources",
           "upward_imports"]

REPO = Path(__file__).resolve().parent.parent

# Installed package name -> folder (pyproject's package-dir).
SOURCE_ROOTS = {
    "memoree": "memoree",
    "memoree.eventlog": "eventlog",
    "memoree.projections": "projections",
    "memoree.commands": "commands",
    "memoree.queries": "queries",
}

# The kernel: modules (and packages, with everything under them) that import only the kernel.
KERNEL = (
    "memoree", "memoree.errors", "memoree.limits", "memoree.ids", "memoree.inputs", "memoree.log",
    "memoree.hosts", "memoree.factplane", "memoree.factplane.emem", "memoree.factplane.identity",
    "memoree.factplane.materializers",
)
_KERNEL_PACKAGES = ("memoree.factplane.emem",)

LAYER_RANKS = {"kernel": 0, "eventlog": 1, "projections": 2, "commands": 3, "queries": 3, "front door": 4}


def layer_of(module: str) -> str:
    if module in KERNEL or any(module.startswith(p + ".") for p in _KERNEL_PACKAGES):
        return "kernel"
    for layer in ("eventlog", "projections", "commands", "queries"):
        if module == f"memoree.{layer}" or module.startswith(f"memoree.{layer}."):
            return layer
    return "front door"


def read_sources(repo: Path = REPO) -> dict[str, str]:
    """Every installed module's source, by dotted name."""
    sources: dict[str, str] = {}
    for package, folder in SOURCE_ROOTS.items():
        root = repo / folder
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if package == "memoree" and parts and parts[0] in {"eventlog", "projections", "commands", "queries"}:
                continue
            sources[".".join([package, *parts])] = path.read_text(encoding="utf-8")
    return sources


def _imported_names(module: str, is_package: bool, tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(sources: Mapping[str, str], packages: Iterable[str] = ()) -> dict[str, set[str]]:
    """Each module's memoree imports (resolved to the deepest module that exists), itself excluded."""
    known = set(sources)
    package_set = set(packages) | {m.rpartition(".")[0] for m in known}
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        targets: set[str] = set()
        for name in _imported_names(module, module in package_set, ast.parse(source)):
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                targets.add(name)
        graph[module] = targets
    return graph


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import that points up a layer or sideways between commands and queries."""
    problems = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if LAYER_RANKS[theirs] > LAYER_RANKS[mine] or (theirs != mine and LAYER_RANKS[theirs] == LAYER_RANKS[mine]):
                problems.append(f"{module} ({mine}) imports {target} ({theirs})")
    return problems


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
