"""The architecture's layering, checked on the source with ``ast`` (DESIGN.md, "Layout").

Which folder is which package is read from pyproject's ``[tool.setuptools] package-dir``, the one
place the layout is declared; every layer below is named by its package, never by a path."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
PACKAGE_DIR = LAYOUT["package-dir"]
"""package -> folder (repository-relative), as pyproject declares it."""


def folder(package: str) -> str:
    """The repository folder of ``package``: its own package-dir entry, else its parent's folder and its name.

    >>> folder("rubricgym.envs.math"), folder("rubricgym.integrations")
    ('envs/math', 'src/rubricgym/integrations')
    """
    if package in PACKAGE_DIR:
        return PACKAGE_DIR[package]
    parent, _, name = package.rpartition(".")
    return f"{folder(parent)}/{name}"


KERNEL, ENVS_DIR, WRAPPERS, AGENTS = (folder(p) for p in ("rubricgym", "rubricgym.envs", "rubricgym.wrappers", "rubricgym.agents"))
APP, TESTING, INTEGRATIONS = (folder(p) for p in ("rubricgym.app", "rubricgym.testing", "rubricgym.integrations"))
RECIPES = folder("rubricgym.recipes")
APPLICATION = (f"{APP}/", f"{RECIPES}/", f"{KERNEL}/__main__.py")
ABOVE_THE_KERNEL = APPLICATION + (f"{TESTING}/", f"{INTEGRATIONS}/")
"""Inside the kernel's folder but not the kernel: the application, the test doubles, the adapters."""


def package_of(path: Path) -> str:
    """The package a source file belongs to, by the longest package-dir folder that holds it."""
    relative = path.relative_to(ROOT).as_posix()
    owner = max((p for p, f in PACKAGE_DIR.items() if relative.startswith(f + "/")), key=lambda p: len(PACKAGE_DIR[p]))
    inner = Path(relative).relative_to(PACKAGE_DIR[owner]).parts[:-1]
    return ".".join([owner, *inner])


def imports(path: Path) -> list[tuple[int, str]]:
    """Absolute module names imported by ``path`` (relative imports resolved)."""
    package = package_of(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names if not node.module]
    return found


def violations(folder: str, forbidden: tuple[str, ...], skip: tuple[str, ...] = ()) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(skip):
            continue
        bad += [f"{relative}:{line} imports {module}" for line, module in imports(path) if module.startswith(forbidden)]
    return bad


def test_the_layout_is_read_from_pyproject_and_nothing_at_the_root_shadows_the_package():
    assert KERNEL == "src/rubricgym" and not (ROOT / "rubricgym").exists()  # python started at the root finds the install
    for package, path in PACKAGE_DIR.items():
        assert (ROOT / path / "__init__.py").is_file(), f"{package} -> {path} has no __init__.py"
    # every package folder under a mapped root is listed (a new subpackage missing from the wheel fails here)
    listed = {folder(p) for p in LAYOUT["packages"]}
    on_disk = {init.parent.relative_to(ROOT).as_posix() for root in PACKAGE_DIR.values() for init in (ROOT / root).rglob("__init__.py")
               if "__pycache__" not in init.parts}
    assert on_disk == listed, f"on disk, not in pyproject's packages: {sorted(on_disk - listed)}; listed, absent: {sorted(listed - on_disk)}"


def test_the_walker_sees_relative_and_absolute_imports():
    # a walker that missed imports would make every layering test pass: check it on known files
    assert "rubricgym.judges.base" in {m for _, m in imports(ROOT / WRAPPERS / "function.py")}  # absolute
    assert "rubricgym.wrappers.episode" in {m for _, m in imports(ROOT / WRAPPERS / "ruler.py")}  # relative
    assert violations(KERNEL, ("rubricgym.judges",)), "the kernel's own judge imports must be seen"


def test_kernel_imports_no_env_wrapper_or_agent():
    assert violations(KERNEL, ("rubricgym.envs", "rubricgym.wrappers", "rubricgym.agents", "rubricgym.recipes"),
                      skip=APPLICATION + (f"{INTEGRATIONS}/", f"{TESTING}/")) == []


def test_application_layer_is_where_the_kernel_meets_the_rest():
    # the CLI does reach the agents (so the skip above is what lets it, not an empty walk)
    assert violations(APP, ("rubricgym.agents",))


def test_nothing_imports_the_integrations():
    # TRL / verl adapters sit on top (DESIGN.md): no layer below may depend on them
    for below in (KERNEL, ENVS_DIR, WRAPPERS, AGENTS):
        assert violations(below, ("rubricgym.integrations",), skip=(f"{INTEGRATIONS}/",)) == []


@pytest.mark.parametrize("package,forbidden", [
    ("rubricgym.envs", ("rubricgym.wrappers", "rubricgym.agents", "rubricgym.judges", "rubricgym.llm", "rubricgym.app",
                        "rubricgym.recipes")),
    ("rubricgym.wrappers", ("rubricgym.agents", "rubricgym.app", "rubricgym.recipes")),
    ("rubricgym.agents", ("rubricgym.app", "rubricgym.recipes", "rubricgym.integrations")),
    ("rubricgym.integrations", ("rubricgym.app", "rubricgym.recipes")),
])
def test_dependencies_point_one_way(package, forbidden):
    # the judge family's task is to be a judge: it reads RULER's prompt format (and no more)
    skip = (f"{ENVS_DIR}/judge.py",) if package == "rubricgym.envs" else ()
    assert violations(folder(package), forbidden, skip=skip) == []


def test_the_judge_family_reads_only_the_judges_prompt_format():
    assert violations(ENVS_DIR, ("rubricgym.wrappers", "rubricgym.agents", "rubricgym.app")) == []
    reached = {m for _, m in imports(ROOT / ENVS_DIR / "judge.py") if m.startswith(("rubricgym.judges", "rubricgym.llm"))}
    # (and the pairwise-agreement rule its reward is, shared with the judge cores in judges.base)
    assert reached == {"rubricgym.judges.ruler", "rubricgym.judges.base", "rubricgym.llm.jsonutil"}


def test_testing_doubles_are_below_nothing():
    # rubricgym.testing serves tests and benchmarks: the library itself never imports it
    for below in (KERNEL, ENVS_DIR, WRAPPERS, AGENTS):
        assert violations(below, ("rubricgym.testing",), skip=(f"{TESTING}/",)) == []


def test_the_trainer_and_the_adapters_import_no_family_module():
    # OpenEnv's client and served variants live in rubricgym.openenv; a family is reached through the registry
    assert violations(AGENTS, ("rubricgym.envs.",)) == []
    assert violations(INTEGRATIONS, ("rubricgym.envs.",)) == []
    reached = {m for _, m in imports(ROOT / AGENTS / "train.py")}
    assert "rubricgym.openenv.client.served_variant" in reached or "rubricgym.openenv.client" in reached  # the walk sees it


def test_integrations_use_their_trainer_not_ours():
    assert violations(INTEGRATIONS, ("rubricgym.agents",)) == []


# names that only a family, a scheme or a layer above the kernel may say
# ("rubricgym.envs" alone is the families' entry-point group, a name the kernel reads, not a module it loads)
UPWARD_STRINGS = ("rubricgym.wrappers", "rubricgym.agents", "rubricgym.envs.", "rubricgym.envs:", "rubricgym.integrations")
GENERIC_NAMES = ("Math-v0", "MathRuler", "RagSupport", "ToolUse", "WordSort", "FunctionCall", '"levels"', "'levels'",
                 '"ruler"', '"rubric"', "generated")


def _strings(path: Path) -> list[tuple[int, str]]:
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_kernel_loads_no_wrapper_by_string():
    bad = []
    for path in sorted((ROOT / KERNEL).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(ABOVE_THE_KERNEL):
            continue
        bad += [f"{relative}:{line} says {text!r}" for line, text in _strings(path)
                if any(text.startswith(s) for s in UPWARD_STRINGS)]
    assert bad == []


@pytest.mark.parametrize("path", [f"{KERNEL}/registration.py", f"{KERNEL}/chatenv.py", f"{AGENTS}/train.py",
                                  f"{AGENTS}/evaluation.py", f"{AGENTS}/rollout.py", f"{WRAPPERS}/scheme.py",
                                  f"{WRAPPERS}/episode.py", f"{APP}/bench.py"])
def test_generic_modules_name_no_family_scheme_level_or_id(path):
    # docstrings and examples may show ids; code may not decide by them (the CLI's `judge` and
    # `baseline` commands are RULER's and Math's own tools, so rubricgym/app/cli.py is not listed)
    tree = ast.parse((ROOT / path).read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    field_docs = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    help_texts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg in ("help", "description")
                  for part in ast.walk(node.value)}
    bad = [f"{path}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
           if isinstance(node, ast.Constant) and isinstance(node.value, str)
           and id(node) not in docstrings | field_docs | help_texts
           and any(name.strip("'\"") == node.value or name in repr(node.value) for name in GENERIC_NAMES)]
    assert bad == []


def test_no_python_file_is_over_500_lines():
    # a file past 500 lines holds two things: split it where they part (issue #51)
    folders = [*PACKAGE_DIR.values(), "benchmarks", "tests"]
    long = {str(path.relative_to(ROOT)): n for folder in folders for path in (ROOT / folder).rglob("*.py")
            if "__pycache__" not in path.parts and (n := len(path.read_text().splitlines())) > 500}
    assert long == {}
