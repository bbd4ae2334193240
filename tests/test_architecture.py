"""The import contract of the house (docs/architecture.md):

- the engine imports no UI library and nothing of the workbench (import-linter contracts in
  pyproject.toml);
- the workbench reaches the engine only through the session, the stage events and options,
  errors and the fact/plan types (an allow-list checked on grimp's import graph);
- no import cycles, counting that importing `a.b.c` runs `a.b`'s __init__;
- target names are compared in the target table only.
"""

from __future__ import annotations

import copy
import re

import grimp
import networkx as nx
import pytest
from importlinter.cli import lint_imports

from conftest import ROOT

# What `workbench` may import from `engine`: the facade, its options and events, errors,
# and fact/plan types and pure helpers that load without TVM.
WORKBENCH_MAY_IMPORT = {
    "engine.session", "engine.events", "engine.errors", "engine.files", "engine.graphviz",
    "engine.opgraph", "engine.model", "engine.parallel.plan", "engine.parallel.outcome", "engine.blockdeps",
    "engine.blockdeps.facts", "engine.tuning", "engine.tuning.options", "engine.timing",
}


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("engine", "workbench", exclude_type_checking_imports=True, cache_dir=None)


def workbench_violations(graph) -> list[str]:
    """`workbench.x -> engine.y` imports outside the allow-list."""
    out = []
    for module in sorted(m for m in graph.modules if m.startswith("workbench")):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported.startswith("engine") and imported not in WORKBENCH_MAY_IMPORT:
                out.append(f"{module} -> {imported}")
    return out


def import_cycles(graph) -> list[list[str]]:
    """Cycles of the import graph, with an edge to each package whose __init__ an import runs."""
    g = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            g.add_edge(module, imported)
            parts = imported.split(".")
            for n in range(1, len(parts)):
                package = ".".join(parts[:n])
                if package != module and not module.startswith(package + "."):
                    g.add_edge(module, package)
    return [c for c in nx.simple_cycles(g)]


def test_import_linter_contracts_hold():
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def test_workbench_reaches_the_engine_through_the_session(graph):
    assert workbench_violations(graph) == []


def test_the_check_catches_a_command_importing_the_pipeline(graph):
    before = set(workbench_violations(graph))
    graph = copy.deepcopy(graph)
    graph.add_import(importer="workbench.cmd_inspect", imported="engine.pipeline")
    assert set(workbench_violations(graph)) - before == {"workbench.cmd_inspect -> engine.pipeline"}


def test_no_import_cycles(graph):
    assert import_cycles(graph) == []


def test_the_cycle_check_sees_package_inits(graph):
    graph = copy.deepcopy(graph)
    # engine.parallel's __init__ importing propose: propose -> engine.targets ->
    # engine.parallel.codegen runs engine.parallel's __init__ again, a cycle through it
    graph.add_import(importer="engine.parallel", imported="engine.parallel.propose")
    assert any({"engine.parallel", "engine.parallel.propose", "engine.targets"} <= set(c)
               for c in import_cycles(graph))


TARGET_COMPARISON = re.compile(r'[=!]= ?"(llvm|cuda)"|"(llvm|cuda)" ?[=!]=')


def test_target_names_are_compared_only_in_the_target_table():
    hits = [f"{path.relative_to(ROOT)}:{n}" for folder in ("engine", "workbench")
            for path in sorted((ROOT / folder).rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if TARGET_COMPARISON.search(line) and path != ROOT / "engine" / "targets.py"]
    assert hits == []
