"""The library never imports the click layer: src/hwtune and tuners/ are
usable without hwtune.cli (a notebook, a benchmark, another front end), and
a command's output goes through hwtune.report.export, not through cli/.
Nor does src/hwtune import the tuners (tuners/ stands on the library: a run
reads what they stored through hwtune.engine.conv_knobs), save the facade
hwtune.api, whose tune() runs them as `hwtune tune-graph` does.
Read from the source tree (AST), so an import inside a function counts."""

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folders installed under the hwtune package (pyproject's wheel.packages),
# with the package name of each; cli/ ("hwtune/cli") is the one left out.
LIBRARY = {ROOT / "src" / "hwtune": "hwtune", ROOT / "tuners": "hwtune.tuners"}
FORBIDDEN = "hwtune.cli"
TUNERS = "hwtune.tuners"
# The front ends over the whole library, tuners included (cli/ is the other).
ABOVE_TUNERS = {"hwtune.api"}


def _module(path: Path, folder: Path, package: str) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package] + parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[Tuple[int, str]]:
    """(line, dotted name) of everything the module imports, relative
    imports resolved, plus import_module("...") / __import__("...") calls."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__"):
                yield node.lineno, node.args[0].value


def _violations(source: str, module: str, is_package: bool = False,
                forbidden: str = FORBIDDEN) -> List[Tuple[int, str]]:
    tree = ast.parse(source)
    return [(line, name) for line, name in _imported(tree, module, is_package)
            if name == forbidden or name.startswith(forbidden + ".")]


def _library_files():
    for folder, package in LIBRARY.items():
        for path in sorted(folder.rglob("*.py")):
            yield path, _module(path, folder, package), path.name == "__init__.py"


def test_the_walk_sees_the_whole_library():
    mods = {m for _, m, _ in _library_files()}
    # A wrong root would make the test below pass on nothing.
    assert {"hwtune.report.export.terminal", "hwtune.scan.summary",
            "hwtune.tuners.pipeline"} <= mods and len(mods) > 50


def _offences(check) -> List[str]:
    """'file:line imports name' for each (line, name) check(source, module,
    is_package) finds in a library file."""
    return [f"{path.relative_to(ROOT)}:{line} imports {name}"
            for path, module, is_package in _library_files()
            for line, name in check(path.read_text(encoding="utf-8"), module, is_package)]


def test_no_library_module_imports_the_click_layer():
    bad = _offences(_violations)
    assert not bad, "the library imports the click layer:\n" + "\n".join(bad)


def test_the_library_does_not_import_the_tuners():
    bad = []
    for path, module, is_package in _library_files():
        if module == TUNERS or module.startswith(TUNERS + ".") or module in ABOVE_TUNERS:
            continue
        for line, name in _violations(path.read_text(encoding="utf-8"), module, is_package,
                                      TUNERS):
            bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "src/hwtune imports the tuners:\n" + "\n".join(bad)


@pytest.mark.parametrize("source", [
    "from hwtune.tuners import conv_knobs",
    "def f():\n    from hwtune.tuners.pipeline import tune_graph\n",
    "from ..tuners.search import Space",  # in hwtune.report: hwtune.tuners
    "import hwtune.tuners.conv_local as cl",
])
def test_each_way_of_importing_the_tuners_is_caught(source):
    assert _violations(source, "hwtune.report.terminal", forbidden=TUNERS), source


@pytest.mark.parametrize("source", [
    "import hwtune.cli",
    "import hwtune.cli.charts as charts",
    "from hwtune.cli import render_scan",
    "from hwtune.cli.options import example",
    "from hwtune import cli",
    "def f():\n    from hwtune.cli.main import cli\n",
    "import importlib\nimportlib.import_module('hwtune.cli.main')",
    "from .. import cli",  # in hwtune.report: hwtune.cli
    "from ..cli.charts import line_chart",
])
def test_each_way_of_importing_the_click_layer_is_caught(source):
    assert _violations(source, "hwtune.report.terminal"), source


@pytest.mark.parametrize("source", [
    "import hwtune.client",  # a name that merely starts alike
    "from hwtune.report import export",
    "from . import fmt",
    "import click",
])
def test_other_imports_pass(source):
    assert not _violations(source, "hwtune.report.terminal"), source


# The lower floors of src/hwtune, each with the only hwtune packages it may
# import (itself included). native/ is the ctypes bindings: it lowers no
# model and seeds no values (hwtune.engine.instance and .simulator do).
# graph/ validates without asking the engine (hwtune.engine.accepts does,
# after validation). db/ stores configs without the engine's rules (`db
# check` hands them in). measure/ times whatever it is given. Every floor
# may import the ground: the typed errors and the package's version.
GROUND = {"hwtune.errors", "hwtune.__version__"}
FLOORS = {
    "hwtune.native": {"hwtune.native"},
    "hwtune.graph": {"hwtune.graph", "hwtune.native"},
    "hwtune.db": {"hwtune.db", "hwtune.machine", "hwtune.native"},
    "hwtune.measure": {"hwtune.measure", "hwtune.native"},
}


def _climbs(source: str, module: str, is_package: bool = False) -> List[Tuple[int, str]]:
    """(line, name) of each import of an hwtune package that module's floor
    may not import (an empty list above the floors)."""
    floor = next((f for f in FLOORS if module == f or module.startswith(f + ".")), None)
    if floor is None:
        return []
    allowed = FLOORS[floor] | GROUND
    return [(line, name) for line, name in _imported(ast.parse(source), module, is_package)
            if (name == "hwtune" or name.startswith("hwtune."))
            and not any(name == a or name.startswith(a + ".") for a in allowed)]


def test_no_lower_floor_imports_a_higher_one():
    bad = _offences(_climbs)
    assert not bad, "a lower floor imports a higher one:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, module", [
    ("from hwtune.engine.lower import lower_graph", "hwtune.native.engine"),
    ("def f():\n    from hwtune.engine.lower import lower_graph\n", "hwtune.graph.validate"),
    ("from hwtune.graph.reference import init_params", "hwtune.native.engine"),
    ("from hwtune import engine", "hwtune.db.integrity"),
    ("from ..engine import runner", "hwtune.measure.engine"),
])
def test_each_climb_is_caught(source, module):
    assert _climbs(source, module), source


@pytest.mark.parametrize("source, module", [
    ("from hwtune.native.graph import NativeGraph", "hwtune.graph.model"),
    ("from hwtune.errors import UsageError", "hwtune.native.engine"),
    ("from hwtune.engine.lower import lower_graph", "hwtune.engine.instance"),
    ("from . import columns", "hwtune.db.integrity"),
])
def test_imports_within_the_floors_pass(source, module):
    assert not _climbs(source, module), source
