"""No import cycle among the modules of src/dualcog, counting every import statement: at module
level, inside functions and under `if TYPE_CHECKING:` alike (a late import only hides a
cycle). Read statically with `ast`, so nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "dualcog"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` (a package is its __init__)."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `name` (its source at `path`) imports anywhere."""
    found = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importer's package, `level - 1` up
                parents = package[: len(package) - node.level + 1]
                base = ".".join([*parents, base] if base else parents)
            # `from pkg import mod` imports the submodule; `from mod import name` the module
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            # A package's own parents are imported before it by Python itself: not an edge.
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycles_in_dualcog() -> None:
    modules = module_files(PACKAGE)
    assert len(modules) > 50  # the package was found
    known = set(modules)
    graph = {name: imported_modules(name, path, known) for name, path in modules.items()}
    assert import_cycles(graph) == []


def test_a_late_import_closing_a_cycle_is_found(tmp_path: Path) -> None:
    """A two-module circle closed inside a function, and one closed under TYPE_CHECKING by a
    relative import, are both reported; a chain without a way back is not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text("B = 1\n\ndef f():\n    from pkg import a\n    return a\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..sub import d\n"
    )
    (package / "sub" / "d.py").write_text("import pkg.sub.c\n")
    (package / "sub" / "e.py").write_text("from pkg.a import B\nfrom . import d\n")
    modules = module_files(package)
    graph = {name: imported_modules(name, path, set(modules)) for name, path in modules.items()}
    assert graph["pkg.sub.e"] == {"pkg.a", "pkg.sub.d"}
    assert import_cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d"]]
