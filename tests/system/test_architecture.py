"""The import graph, read from the source with `ast`: the arrows between packages point one way,
no package imports itself in a circle, and no module reaches into another's private names.

    bot -> integrations -> scheduler -> templates        (and bot -> scheduler, anything -> templates)

Inside `scheduler/`, layers, bottom to top, a lower one never importing a higher one:

    root (errors, bounds, ports, clock, log_context, context, alarms, quota_reuse, testing)
    -> rules/ -> store/ -> engine/ -> holds/ -> pauses/ -> steering/ -> jobs, wiring, front

and nothing in the import closure of `scheduler/rules/` touches the database (`scheduler/store/`,
SQLAlchemy, SQLModel). `bot/` is laid out by surface, in bands, bottom to top:

    root (jobs) -> config/ -> triggers/ -> runtime/ -> observe/ -> commands/ -> chat/
    -> slack/, github/, api/, live/, simulate/ -> serve/ -> cli/

its root holds at most 8 modules, and Slack's libraries (slack_bolt, slack_sdk) are imported only
in `bot/slack/`, GitHub's (PyGithub) only in `bot/github/`, beside `integrations/`. `bot/` asks
the scheduler through `scheduler/front.py` and the root's vocabulary (errors, bounds, ports,
clock, log_context) only, but for the plumbing its composition roots (`bot/runtime/`, the
simulator) build a process with.
`docs/architecture.md` names files and functions that exist.

An import counts wherever it is written: at the top, inside a function, or as a literal
`importlib.import_module("x")` / `find_spec("x")`; an import inside a function that only hides a
cycle is the cycle. Only `if TYPE_CHECKING:` blocks are left out, since they never run.
`from pkg import name` reads `pkg` (its `__init__` runs and is asked for `name`) and, when `name`
is a submodule, that module as well.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGES = ("scheduler", "integrations", "bot", "templates")
# What each package may import from the others.
ALLOWED = {
    "bot": {"integrations", "scheduler", "templates"},
    "integrations": {"scheduler", "templates"},
    "scheduler": {"templates"},
    "templates": set(),
}
IMPORTLIB_CALLS = {"import_module", "find_spec"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    names: tuple[str, ...] = ()  # what a `from target import …` takes


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def statements(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node that runs, at any depth, leaving out `if TYPE_CHECKING:` bodies."""
    for node in nodes:
        if isinstance(node, ast.If) and is_type_checking(node):
            yield from statements(node.orelse)
        else:
            yield node
            yield from statements(ast.iter_child_nodes(node))


def imports(source: str, name: str, *, is_package: bool = False) -> Iterator[tuple[str, int, tuple[str, ...]]]:
    """(imported module path, line, names taken from it) for each import `name` makes."""
    for node in statements([ast.parse(source)]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, ()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, *([node.module] if node.module else [])])
            yield base, node.lineno, tuple(alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and _called(node.func) in IMPORTLIB_CALLS and (named := _literal(node.args)):
            yield named, node.lineno, ()


def _literal(args: list[ast.expr]) -> str | None:
    """The module a call names as a string literal, as in `import_module("scheduler.steering.promotion")`."""
    first = args[0] if args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _called(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def resolve(dotted: str, known: dict[str, Path]) -> str | None:
    """The module of ours that `dotted` names, or its nearest package; None for anything else."""
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def edges(known: dict[str, Path]) -> list[Edge]:
    out: list[Edge] = []
    for name, path in known.items():
        for dotted, line, names in imports(path.read_text(), name, is_package=path.name == "__init__.py"):
            target = resolve(dotted, known)
            if target is not None and target != name:
                out.append(Edge(name, target, line, names))
            for imported in names:
                submodule = f"{dotted}.{imported}"
                if submodule in known and submodule != name:
                    out.append(Edge(name, submodule, line))
    return out


def cycles(nodes: set[str], graph: list[Edge]) -> list[list[str]]:
    """Each set of modules that import one another in a circle (Tarjan's strongly connected
    components with more than one member)."""
    after: dict[str, set[str]] = {n: set() for n in nodes}
    for e in graph:
        if e.source in nodes and e.target in nodes:
            after[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(after[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


KNOWN = modules()
GRAPH = edges(KNOWN)


def package_of(module: str) -> str:
    return module.split(".")[0]


def where(e: Edge) -> str:
    return f"{KNOWN[e.source].relative_to(ROOT)}:{e.line}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_within_a_package(package: str) -> None:
    members = {m for m in KNOWN if package_of(m) == package}
    found = cycles(members, GRAPH)
    lines = []
    for cycle in found:
        lines.append(f"cycle among {', '.join(cycle)}:")
        lines += [
            f"  {where(e)} {e.source} imports {e.target}" for e in GRAPH if e.source in cycle and e.target in cycle
        ]
    if found:
        pytest.fail("\n".join(lines), pytrace=False)


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_packages_below_it(package: str) -> None:
    wrong = [
        f"{where(e)} {e.source} imports {e.target}"
        for e in GRAPH
        if package_of(e.source) == package and package_of(e.target) not in ALLOWED[package] | {package}
    ]
    if wrong:
        pytest.fail(
            f"{package} may import only {sorted(ALLOWED[package]) or 'itself'}:\n" + "\n".join(wrong), pytrace=False
        )


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_another_modules_private_names(package: str) -> None:
    wrong = [
        f"{where(e)} {e.source} imports {name} from {e.target}"
        for e in GRAPH
        if package_of(e.source) == package
        for name in e.names
        if name.startswith("_") and not name.startswith("__")
    ]
    if wrong:
        pytest.fail(
            "a private name is its module's own; make it public or move the code that needs it:\n" + "\n".join(wrong),
            pytrace=False,
        )


# The scheduler's layers, bottom first. A module in the root that is not listed here belongs in
# a layer: placing it is a decision, not a default.
SCHEDULER_LAYERS = ("root", "rules", "store", "engine", "holds", "pauses", "steering", "top")
SCHEDULER_ROOT = {"errors", "bounds", "ports", "clock", "log_context", "context", "testing", "alarms", "quota_reuse"}
SCHEDULER_TOP = {"jobs", "wiring", "front"}
DATABASE = ("sqlalchemy", "sqlmodel", "scheduler.store")


def layer_of(module: str) -> str | None:
    """The scheduler layer a module of ours is in; None outside `scheduler`."""
    parts = module.split(".")
    if parts[0] != "scheduler":
        return None
    if len(parts) == 1 or parts[1] in SCHEDULER_ROOT:
        return "root"
    if parts[1] in SCHEDULER_TOP:
        return "top"
    return parts[1] if parts[1] in SCHEDULER_LAYERS else f"unplaced:{parts[1]}"


def test_every_scheduler_module_is_in_a_layer() -> None:
    unplaced = sorted(m for m in KNOWN if (layer := layer_of(m)) is not None and layer.startswith("unplaced:"))
    assert unplaced == [], f"put each in a layer folder, or name it in SCHEDULER_ROOT/SCHEDULER_TOP: {unplaced}"


def test_a_scheduler_layer_never_imports_a_higher_one() -> None:
    order = {name: i for i, name in enumerate(SCHEDULER_LAYERS)}
    wrong = [
        f"{where(e)} {e.source} ({source}) imports {e.target} ({target})"
        for e in GRAPH
        if (source := layer_of(e.source)) in order
        and (target := layer_of(e.target)) in order
        and order[target] > order[source]
    ]
    if wrong:
        pytest.fail(
            "a layer imports only the layers below it (" + " < ".join(SCHEDULER_LAYERS) + "):\n" + "\n".join(wrong),
            pytrace=False,
        )


# bot/ by surface, bottom first: a package never imports one in a higher band. The surfaces
# share a band (each is reached from serve/ and cli/ and reaches what is below); the CLI, which
# starts every process, is on top.
BOT_LAYERS = (
    ("root",),
    ("config",),
    ("triggers",),
    ("runtime",),
    ("observe",),
    ("commands",),
    ("chat",),
    ("slack", "github", "api", "live", "simulate"),
    ("serve",),
    ("cli",),
)
BOT_ROOT = {"jobs"}  # `bot.jobs:run` is stored in every APScheduler job row: its path never changes
MAX_BOT_ROOT_MODULES = 8
# Imports that point down the bands the wrong way, each with the reason it may: none may be added.
BOT_EXCEPTIONS = {
    # A Slack answer carries its Block Kit lists: the queue and holds handlers ask
    # bot/slack/blocks.py for them when the asking surface is Slack.
    ("bot.chat.reading", "bot.slack.blocks"),
    ("bot.chat.reading", "bot.slack"),
}
# Slack's and GitHub's own libraries, and the only places that may import them.
LIBRARIES = {"slack_bolt": ("bot.slack", "integrations"), "slack_sdk": ("bot.slack", "integrations"),
             "github": ("bot.github", "integrations")}


def bot_package_of(module: str) -> str | None:
    """The bot/ folder a module of ours is in (`root` for bot/ itself); None outside `bot`."""
    parts = module.split(".")
    if parts[0] != "bot":
        return None
    if len(parts) == 1 or parts[1] in BOT_ROOT:
        return "root"
    return parts[1] if (ROOT / "bot" / parts[1]).is_dir() else f"unplaced:{parts[1]}"


def bot_band(package: str) -> int | None:
    return next((i for i, band in enumerate(BOT_LAYERS) if package in band), None)


def test_the_root_of_bot_holds_at_most_eight_modules() -> None:
    root = sorted(p.name for p in (ROOT / "bot").glob("*.py"))
    assert len(root) <= MAX_BOT_ROOT_MODULES, f"bot/ is laid out by surface; put these in its folders: {root}"


def test_every_bot_module_is_in_a_placed_folder() -> None:
    unplaced = sorted(m for m in KNOWN if (package := bot_package_of(m)) is not None and bot_band(package) is None)
    assert unplaced == [], (
        f"put each in a bot/ folder, or name the folder in BOT_LAYERS (or the module in BOT_ROOT): {unplaced}"
    )


def test_a_bot_package_never_imports_one_in_a_higher_band() -> None:
    wrong = [
        f"{where(e)} {e.source} ({source}) imports {e.target} ({target})"
        for e in GRAPH
        if (source := bot_package_of(e.source)) is not None and (target := bot_package_of(e.target)) is not None
        and (low := bot_band(source)) is not None and (high := bot_band(target)) is not None and high > low
        and (e.source, e.target) not in BOT_EXCEPTIONS
    ]
    if wrong:
        bands = " < ".join("{" + ", ".join(band) + "}" if len(band) > 1 else band[0] for band in BOT_LAYERS)
        pytest.fail(f"a bot/ package imports only the bands below it ({bands}):\n" + "\n".join(wrong), pytrace=False)


def test_the_exceptions_to_the_bot_bands_are_still_needed() -> None:
    stale = BOT_EXCEPTIONS - {(e.source, e.target) for e in GRAPH}
    assert not stale, f"drop the exceptions no import needs any more: {sorted(stale)}"


@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_slack_and_github_libraries_are_imported_only_by_their_surface(library: str) -> None:
    allowed = LIBRARIES[library]
    wrong = [
        f"{path.relative_to(ROOT)}:{line} {name} imports {dotted}"
        for name, path in KNOWN.items()
        if not any(name == place or name.startswith(place + ".") for place in allowed)
        for dotted, line, _names in imports(path.read_text(), name, is_package=path.name == "__init__.py")
        if dotted == library or dotted.startswith(library + ".")
    ]
    assert wrong == [], f"{library} belongs to {' and '.join(allowed)}:\n" + "\n".join(wrong)


def closure(start: str, graph: list[Edge]) -> set[str]:
    """Every module of ours that importing `start` runs: what it imports, transitively, and the
    packages above each (their `__init__` runs first)."""
    after: dict[str, set[str]] = {}
    for e in graph:
        after.setdefault(e.source, set()).add(e.target)
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        todo += [m for m in [*after.get(module, ()), *parents] if m in KNOWN]
    return seen


# The modules that receive: the routes, the Bolt app and its listeners.
INBOUND_ROUTES = {
    "bot.github.webhook",
    "bot.slack.http",
    "bot.slack.app",
    "bot.api",
    "bot.live.page",
    "bot.observe.metrics",
}


def test_the_worker_builds_its_notifiers_without_an_inbound_route() -> None:
    """Outbound notifiers are built where the process is built (`bot/runtime/notices.py`,
    `bot/slack/notices.py`): `pacer worker` posts status comments and Slack notices, and mounts
    no route, so none is in its import closure."""
    assert sorted(closure("bot.serve.worker", GRAPH) & INBOUND_ROUTES) == []


def test_the_rules_touch_no_database_in_their_whole_import_closure() -> None:
    wrong = []
    for rule in sorted(m for m in KNOWN if layer_of(m) == "rules"):
        for module in sorted(closure(rule, GRAPH)):
            for dotted, line, _names in imports(
                KNOWN[module].read_text(), module, is_package=KNOWN[module].name == "__init__.py"
            ):
                if any(dotted == banned or dotted.startswith(banned + ".") for banned in DATABASE):
                    via = "" if module == rule else f" (through {module})"
                    wrong.append(f"{KNOWN[module].relative_to(ROOT)}:{line} {rule}{via} imports {dotted}")
    if wrong:
        pytest.fail(
            "scheduler/rules/ is pure: the layers above read the rows and pass values in:\n" + "\n".join(wrong),
            pytrace=False,
        )


def test_the_closure_follows_imports_and_the_packages_above_them() -> None:
    graph = [
        Edge("scheduler.rules.gate", "scheduler.rules.snapshot", 1),
        Edge("scheduler.rules.snapshot", "scheduler.errors", 1),
    ]
    assert closure("scheduler.rules.gate", graph) == {
        "scheduler.rules.gate", "scheduler.rules.snapshot", "scheduler.errors", "scheduler.rules", "scheduler",
    }


def test_the_turn_engine_package_is_never_bound_to_a_name() -> None:
    """`engine` is SQLAlchemy's engine wherever it is a variable: the package `scheduler.engine`
    is only ever imported a module at a time."""
    wrong = [
        f"{KNOWN[name].relative_to(ROOT)}:{line} imports the package scheduler.engine whole"
        for name in KNOWN
        for dotted, line, names in imports(KNOWN[name].read_text(), name, is_package=KNOWN[name].name == "__init__.py")
        if (dotted == "scheduler.engine" and not names) or (dotted == "scheduler" and "engine" in names)
    ]
    assert wrong == []


def test_pool_means_the_account_pool_inside_the_scheduler() -> None:
    """The threads that run turns are workers (`TurnWorkers`, `VirtualWorkers`); "pool" is the
    account pool of `scheduler/rules/pool.py`."""
    wrong = [
        f"{name}.{node.name}"
        for name, path in KNOWN.items()
        if layer_of(name) is not None and name != "scheduler.rules.pool"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and "pool" in node.name.lower()
    ]
    modules = [
        name
        for name in KNOWN
        if layer_of(name) is not None and "pool" in name.rsplit(".", 1)[-1] and name != "scheduler.rules.pool"
    ]
    assert wrong == [] and modules == []


def test_the_reader_sees_every_kind_of_import() -> None:
    source = '''
from typing import TYPE_CHECKING
import a.b as ab
from .sibling import thing
from . import other

if TYPE_CHECKING:
    from hidden import Type
else:
    import shown

def later():
    from deep.inside import helper
    importlib.import_module("by.name")
'''
    found = {(dotted, names) for dotted, _line, names in imports(source, "pkg.mod")}
    assert found == {
        ("typing", ("TYPE_CHECKING",)), ("a.b", ()), ("pkg.sibling", ("thing",)), ("pkg", ("other",)),
        ("shown", ()), ("deep.inside", ("helper",)), ("by.name", ()),
    }


def test_a_cycle_is_reported_with_its_members() -> None:
    graph = [Edge("p.a", "p.b", 1), Edge("p.b", "p.c", 1), Edge("p.c", "p.a", 1), Edge("p.c", "p.d", 1)]
    assert cycles({"p.a", "p.b", "p.c", "p.d"}, graph) == [["p.a", "p.b", "p.c"]]


# The store's caches are the store's: the layers above (and bot/, integrations/) ask named store
# functions (`store.hold_reads.live_operator_holds`, `store.turn_reads.running_rows`) and never see a
# memo, a presence check, a kept read or the key it is kept under.
CACHE_CALLS = {
    "cached", "kept", "kept_for", "present", "forget", "wrote", "invalidated_by", "register_presence", "forget_kept",
}


def outside_the_store() -> Iterator[tuple[str, Path]]:
    for name, path in KNOWN.items():
        if package_of(name) in ("scheduler", "integrations", "bot") and not name.startswith("scheduler.store"):
            yield name, path


def test_only_the_store_imports_its_caches() -> None:
    wrong = [
        f"{where(e)} {e.source} imports {e.target}"
        for e in GRAPH
        if e.target == "scheduler.store.caches" and not e.source.startswith("scheduler.store")
    ]
    assert wrong == [], (
        "read and write through a named function in scheduler/store/, not through its caches:\n" + "\n".join(wrong)
    )


def test_no_cache_call_or_string_cache_key_outside_the_store() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{node.lineno} "
        f"{_called(node.func)}({', '.join(repr(a.value) for a in node.args if isinstance(a, ast.Constant))})"
        for name, path in outside_the_store()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and _called(node.func) in CACHE_CALLS
    ]
    assert wrong == [], "a cache and its keys live in scheduler/store/; ask a named store function:\n" + "\n".join(
        wrong
    )


MAX_MODULE_LINES = 400
MAX_PARAMETERS = 6


def production_modules() -> Iterator[tuple[str, Path]]:
    for name, path in modules().items():
        if ".migrations." not in f".{name}." and name.split(".")[0] in ("scheduler", "integrations", "bot"):
            yield name, path


def test_no_production_module_is_over_400_lines() -> None:
    long = {
        name: n for name, path in production_modules() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines (a module is one idea): {long}"


MAX_ROOT_MODULES = 8


def test_the_root_of_tests_holds_at_most_eight_modules() -> None:
    """A test stands in the folder of what it tests (rules/, engine/, surfaces/slack/, system/ …), so
    the root keeps only what every folder shares: conftest.py and the package's __init__.py."""
    root = sorted(path.name for path in (ROOT / "tests").glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, (
        f"{len(root)} modules in the root of tests/ (at most {MAX_ROOT_MODULES}): {root}"
    )


def test_every_folder_of_tests_is_a_package() -> None:
    """pytest imports a test module by its dotted name below the package root, so two folders may
    each hold a test_views.py only when every folder between them and tests/ has an __init__.py."""
    bare = sorted(str(d.relative_to(ROOT)) for d in (ROOT / "tests").rglob("*")
                  if d.is_dir() and any(d.glob("test_*.py")) and not (d / "__init__.py").exists())
    assert bare == [], f"test folders without an __init__.py: {bare}"


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    first = (a.posonlyargs + a.args)[:1]
    return count - (1 if first and first[0].arg in ("self", "cls") else 0)


def test_no_scheduler_function_takes_more_than_six_parameters() -> None:
    wide = [
        f"{name}.{node.name} ({parameters(node)})"
        for name, path in production_modules() if name.startswith("scheduler")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameters(node) > MAX_PARAMETERS
    ]
    assert wide == [], (
        f"functions with more than {MAX_PARAMETERS} parameters (pass one value that names the thing): {wide}"
    )


# Exceptions that report a programmer's mistake (a broken invariant, a misuse of an API) to the
# programmer; every other exception carries a sentence a person reads, so it comes from templates/.
PROGRAMMER_ERRORS = {"ValueError", "RuntimeError", "LookupError", "TypeError", "AssertionError", "AlarmInTransaction"}


def raised_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def test_no_sentence_a_person_reads_is_built_in_a_raise() -> None:
    """P10: every person-facing sentence is in templates/; a raise that builds its message with an
    f-string keeps one in Python instead."""
    built = [
        f"{name}:{node.lineno} {raised_name(node.exc)}"
        for name, path in production_modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args
        and isinstance(node.exc.args[0], ast.JoinedStr) and raised_name(node.exc) not in PROGRAMMER_ERRORS
    ]
    assert built == [], f"raise with an f-string sentence (use templates.error_text): {built}"


# --- docs/architecture.md: every file and function it names exists ------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"
PERFORMANCE = ROOT / "docs" / "performance.md"  # the benchmark diaries the map points to
FILE_REF = re.compile(r"`([\w./-]+\.py)(?::\s*([^`]*))?`")
DOTTED_REF = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
FILE_SUFFIXES = {"py", "toml", "md", "j2", "sql", "json", "yaml", "yml", "js", "html", "sh", "ini", "lock", "png"}


def defined_names(path: Path) -> dict[str, set[str]]:
    """Top-level names a module defines or imports -> the attributes a class of that name has."""
    found: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            found[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            } | {
                t.id
                for n in node.body
                if isinstance(n, ast.AnnAssign | ast.Assign)
                for t in ([n.target] if isinstance(n, ast.AnnAssign) else n.targets)
                if isinstance(t, ast.Name)
            }
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in [node.target] if isinstance(node, ast.AnnAssign) else node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = set()
        elif isinstance(node, ast.ImportFrom):
            found.update({alias.asname or alias.name: set() for alias in node.names})
    return found


def doc_file(reference: str) -> Path | None:
    """The file a doc names: a path from the repository root or from `scheduler/`."""
    for base in (ROOT, ROOT / "scheduler"):
        if (base / reference).is_file():
            return base / reference
    return None


def missing_names(path: Path, names: Iterable[str]) -> list[str]:
    defined = defined_names(path)
    missing = []
    for name in names:
        owner, _, attribute = name.partition(".")
        if owner not in defined or (attribute and attribute not in defined[owner]):
            missing.append(name)
    return missing


@pytest.mark.parametrize("doc", [ARCHITECTURE, PERFORMANCE], ids=lambda p: p.name)
def test_the_architecture_page_names_files_and_functions_that_exist(doc: Path) -> None:
    text = doc.read_text()
    scheduler_basenames: dict[str, list[str]] = {}
    for name in KNOWN:
        if name.startswith("scheduler.") and ".migrations" not in name:
            scheduler_basenames.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    wrong = []
    for match in FILE_REF.finditer(text):
        reference, listed = match.group(1), match.group(2)
        path = doc_file(reference)
        if path is None:
            wrong.append(f"{reference}: no such file under the root or scheduler/")
            continue
        names = [n.strip() for n in (listed or "").split(",") if re.fullmatch(r"[A-Za-z_][\w.]*", n.strip())]
        wrong += [f"{reference}: {name} is not defined there" for name in missing_names(path, names)]
    for match in DOTTED_REF.finditer(text):
        parts = match.group(1).split(".")
        if parts[-1] in FILE_SUFFIXES or (match.group(0).endswith("()`") and len(parts) == 2 and parts[0] in PACKAGES):
            continue  # a file (`jobs.py`), a call on a variable (APScheduler's `scheduler.wakeup()`)
        if parts[0] in PACKAGES:
            cut = max((i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in KNOWN), default=0)
            module = ".".join(parts[:cut])
        elif len(scheduler_basenames.get(parts[0], [])) == 1:
            cut, module = 1, scheduler_basenames[parts[0]][0]
        else:
            continue  # an attribute of a value (`Context.emit`), a file name (`fly.toml`)
        if not module:
            wrong.append(f"{match.group(1)}: no such module")
        elif cut < len(parts):
            wrong += [
                f"{match.group(1)}: {name} is not defined in {module}"
                for name in missing_names(KNOWN[module], [".".join(parts[cut : cut + 2])])
            ]
    assert wrong == [], f"docs/{doc.name} names what is not there:\n" + "\n".join(wrong)


def test_no_template_name_is_both_a_text_and_a_slack_file() -> None:
    """One sentence, one source: a chat answer is one file under templates/chat/ whose markup is a
    filter of the flavour, never a text/ and a slack/ copy that can drift apart."""
    names = {kind: {p.name for p in (ROOT / "templates" / kind).glob("*.j2")} for kind in ("text", "slack")}
    both = sorted(names["text"] & names["slack"])
    assert both == [], (
        f"templates in both text/ and slack/ (make one templates/chat/ file with the markup filters): {both}"
    )


# bot/ asks the scheduler through one front (`scheduler/front.py`) and the root's vocabulary, the
# modules that import nothing of the scheduler but one another, so a light process never loads
# the engine. The composition roots build a process, which no surface does: the plumbing each
# may import beside them.
SCHEDULER_FRONT = "scheduler.front"
SCHEDULER_VOCABULARY = {
    "scheduler.errors",
    "scheduler.bounds",
    "scheduler.ports",
    "scheduler.clock",
    "scheduler.log_context",
}
SCHEDULER_PLUMBING = {
    # Builds the Context and its thread workers, installs the plug-ins and the periodic sweeps,
    # recovers crashed turns and hands running ones over on a drain, names its lease owner, and
    # reads the fallback burn table for the runners it builds.
    "bot.runtime": {"scheduler.wiring", "scheduler.context", "scheduler.engine.leases", "scheduler.engine.lifecycle",
                    "scheduler.engine.recheck_sweep", "scheduler.rules.burn"},
    # Installs the same plug-ins and periodic sweeps into its virtual process.
    "bot.simulate": {"scheduler.wiring"},
}


def scheduler_doors(source: str) -> set[str]:
    folder = ".".join(source.split(".")[:2])
    return {SCHEDULER_FRONT, *SCHEDULER_VOCABULARY, *SCHEDULER_PLUMBING.get(folder, ())}


def scheduler_imports_from_bot() -> Iterator[Edge]:
    for e in GRAPH:
        if package_of(e.source) != "bot" or package_of(e.target) != "scheduler":
            continue
        if e.target == "scheduler" and e.names and all(f"scheduler.{n}" in KNOWN for n in e.names):
            continue  # `from scheduler import bounds`: the edge to the submodule is the one to judge
        yield e


def test_bot_asks_the_scheduler_through_its_front() -> None:
    wrong = [
        f"{where(e)} {e.source} imports {e.target}"
        for e in scheduler_imports_from_bot()
        if e.target not in scheduler_doors(e.source)
    ]
    assert wrong == [], (
        "import it from scheduler.front (add it there, in its group, if a surface needs it):\n" + "\n".join(wrong)
    )


def test_the_scheduler_plumbing_bot_may_import_is_still_needed() -> None:
    used = {(".".join(e.source.split(".")[:2]), e.target) for e in scheduler_imports_from_bot()}
    stale = sorted(
        (folder, m) for folder, plumbing in SCHEDULER_PLUMBING.items() for m in plumbing if (folder, m) not in used
    )
    assert stale == [], f"drop the plumbing no import needs any more: {stale}"


def test_nothing_inside_the_scheduler_imports_its_front() -> None:
    """The front is the face's door; a scheduler module that used it would make it a hub."""
    wrong = [f"{where(e)} {e.source}" for e in GRAPH if e.target == SCHEDULER_FRONT and package_of(e.source) != "bot"]
    assert wrong == [], "the front is for bot/; import from the layer's own module:\n" + "\n".join(wrong)
