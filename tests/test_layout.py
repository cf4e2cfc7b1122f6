"""The import contract: every import of the product's modules (at module level or inside a
function; ``TYPE_CHECKING`` blocks aside, except for circles), read by grimp, against the
layering the packages' docstrings state. A new import that runs the wrong way, or closes a
circle (an import under ``TYPE_CHECKING`` too), fails here with the chain that does it."""

from __future__ import annotations

from functools import cache

import grimp
import pytest

PACKAGES = ("drilldown", "flows", "tasks", "sql_tools", "prompts")
EXTERNAL_SERVICES = ("prefect", "anthropic", "supabase", "psycopg")

# (importer, what it must never import, why)
FORBIDDEN = [
    ("sql_tools", ("tasks", "flows", "drilldown", *EXTERNAL_SERVICES),
     "the SQL tools are the bottom layer: the only road to the data"),
    ("prompts", ("tasks", "flows", "drilldown", "sql_tools"), "templates import nothing of ours"),
    ("tasks.ingest", ("tasks.engine", "tasks.agent", "tasks.report", "tasks.store", "tasks.run",
                      "tasks.tools", "flows", "drilldown", "prefect", "anthropic"),
     "loading knows nothing of what the data is used for"),
    ("tasks.engine", ("tasks.agent", "tasks.report", "tasks.store", "tasks.run", "tasks.tools",
                      "tasks.ingest", "flows", "drilldown", "prefect", "anthropic", "supabase",
                      "psycopg"),
     "the engine reads through sql_tools only and knows no agent, report, store or flow"),
    ("tasks.agent", ("tasks.report", "tasks.store", "flows", "drilldown", "prefect"),
     "the agent's units are composed by the flow, not by each other"),
    ("tasks.report", ("tasks.agent.run", "tasks.agent.steps", "tasks.store", "flows",
                      "drilldown", "prefect", "anthropic"),
     "the report renders results; it runs no agent and stores nothing"),
    ("tasks.store", ("tasks.agent", "tasks.report", "flows", "drilldown", "prefect", "anthropic"),
     "the memory stores what it is given"),
    ("tasks", ("flows", "drilldown", "prefect"), "units of work are plain Python; flows wrap them"),
    ("flows", ("drilldown",), "the command line calls the flows, never the other way"),
]  # fmt: skip

# (importer module, imported package, why) that the rules above allow all the same
EXCEPTIONS = [
    ("sql_tools._postgres", "psycopg",
     "data read in place in Postgres: the Postgres tool context is the one road to that data, "
     "as the DuckDB context is to a loaded file, so it belongs to the bottom layer; psycopg is "
     "its driver (as duckdb is the other's), and no other module of sql_tools imports it"),
]  # fmt: skip


_EXCEPTED = {(module, target) for module, target, _ in EXCEPTIONS}


def test_each_exception_is_used() -> None:
    """An exception names a real import: one that no longer happens is dropped from the list."""
    g = graph()
    for module, target, _ in EXCEPTIONS:
        assert target in g.find_modules_directly_imported_by(module), (module, target)


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *PACKAGES,
        include_external_packages=True,
        exclude_type_checking_imports=True,
        cache_dir=None,
    )


@cache
def whole_graph() -> grimp.ImportGraph:
    """Every import, those under ``TYPE_CHECKING`` too."""
    return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)


def _modules(package: str) -> set[str]:
    g = graph()
    return {package} | g.find_descendants(package) if package in g.modules else set()


@pytest.mark.parametrize(("importer", "forbidden", "why"), FORBIDDEN, ids=[f[0] for f in FORBIDDEN])
def test_no_import_runs_the_wrong_way(importer: str, forbidden: tuple[str, ...], why: str) -> None:
    g = graph()
    inside = _modules(importer)
    assert inside, f"{importer} is not a package of the product"
    broken = []
    for target in forbidden:
        targets = _modules(target) if "." in target or target in PACKAGES else {target}
        for module in sorted(inside):
            for imported in sorted(g.find_modules_directly_imported_by(module) & targets):
                if imported in inside or (module, target) in _EXCEPTED:
                    continue
                lines = g.get_import_details(importer=module, imported=imported)
                where = ", ".join(f"line {d['line_number']}" for d in lines) or "?"
                broken.append(f"{module} imports {imported} ({where})")
    assert not broken, f"{importer}: {why}:\n" + "\n".join(broken)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_import_cycles() -> None:
    """No circle of imports, those under ``TYPE_CHECKING`` included: a module that needs
    another's types only to annotate still depends on it."""
    g = whole_graph()
    ours = {m for p in PACKAGES for m in _modules(p)}
    edges = {m: g.find_modules_directly_imported_by(m) & ours for m in ours}
    assert _cycles(edges) == []


def test_the_cycle_check_sees_type_checking_imports() -> None:
    """The graph the cycle check reads holds the imports made for annotations only (the store's
    package names its Postgres store's type under ``TYPE_CHECKING``), which the layering's graph
    skips."""
    skipped = [
        (m, i)
        for m in sorted(_modules("tasks"))
        for i in sorted(whole_graph().find_modules_directly_imported_by(m))
        if i not in graph().find_modules_directly_imported_by(m)
    ]
    assert skipped


def test_the_cycle_check_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_the_contract_sees_imports_inside_functions() -> None:
    """An import inside a function (the CLI reaches the flows layer only when a command needs
    it: the composition for an in-process investigation, the Prefect flow for a flow run) is an
    edge like any other: sql_tools once reached up into the engine that way."""
    g = graph()
    [composition] = g.get_import_details(importer="drilldown.cli", imported="tasks.investigation")
    assert composition["line_contents"].startswith("from tasks.investigation import")
    [flow] = g.get_import_details(importer="drilldown.cli", imported="flows.investigate")
    assert flow["line_contents"].startswith("from flows.investigate import investigate")
    assert "prefect" not in g.find_modules_directly_imported_by("drilldown.cli")


def test_upper_layers_import_the_public_sql_tools() -> None:
    """Above ``sql_tools`` nothing imports one of its ``_`` modules: the package's ``__init__``
    is its surface (``TYPE_CHECKING`` imports included)."""
    g = whole_graph()
    inside = _modules("sql_tools")
    private = {m for m in inside if m.rsplit(".", 1)[-1].startswith("_")}
    broken = [
        f"{module} imports {imported}"
        for module in sorted({m for p in PACKAGES for m in _modules(p)} - inside)
        for imported in sorted(g.find_modules_directly_imported_by(module) & private)
    ]
    assert not broken, "\n".join(broken)
