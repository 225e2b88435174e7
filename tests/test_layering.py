"""The architecture's layering, checked on the source with ``ast`` (DESIGN.md, "Layout")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_OF = {"rubricgym": "rubricgym", "envs": "rubricgym.envs", "wrappers": "rubricgym.wrappers", "agents": "rubricgym.agents",
              "integrations": "rubricgym.integrations"}
APPLICATION = ("rubricgym/app/", "rubricgym/__main__.py")


def imports(path: Path) -> list[tuple[int, str]]:
    """Absolute module names imported by ``path`` (relative imports resolved)."""
    folder = path.relative_to(ROOT).parts[0]
    package = ".".join([PACKAGE_OF[folder], *path.relative_to(ROOT / folder).parts[:-1]])
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


def test_the_walker_sees_relative_and_absolute_imports():
    # a walker that missed imports would make every layering test pass: check it on known files
    assert "rubricgym.judges.base" in {m for _, m in imports(ROOT / "wrappers" / "function.py")}  # absolute
    assert "rubricgym.wrappers.episode" in {m for _, m in imports(ROOT / "wrappers" / "ruler.py")}  # relative
    assert violations("rubricgym", ("rubricgym.judges",)), "the kernel's own judge imports must be seen"


def test_kernel_imports_no_env_wrapper_or_agent():
    assert violations("rubricgym", ("rubricgym.envs", "rubricgym.wrappers", "rubricgym.agents"), skip=APPLICATION) == []


def test_application_layer_is_where_the_kernel_meets_the_rest():
    # the CLI does reach the agents (so the skip above is what lets it, not an empty walk)
    assert violations("rubricgym/app", ("rubricgym.agents",))


def test_nothing_imports_the_integrations():
    # TRL / verl adapters sit on top (DESIGN.md): no layer below may depend on them
    for folder in ("rubricgym", "envs", "wrappers", "agents"):
        assert violations(folder, ("rubricgym.integrations",)) == []


@pytest.mark.parametrize("folder,forbidden", [
    ("envs", ("rubricgym.wrappers", "rubricgym.agents", "rubricgym.judges", "rubricgym.llm", "rubricgym.app")),
    ("wrappers", ("rubricgym.agents", "rubricgym.app")),
    ("agents", ("rubricgym.app", "rubricgym.integrations")),
    ("integrations", ("rubricgym.app",)),
])
def test_dependencies_point_one_way(folder, forbidden):
    assert violations(folder, forbidden) == []
