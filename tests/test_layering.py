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
    # the judge family's task is to be a judge: it reads RULER's prompt format (and no more)
    skip = ("envs/judge.py",) if folder == "envs" else ()
    assert violations(folder, forbidden, skip=skip) == []


def test_the_judge_family_reads_only_the_judges_prompt_format():
    assert violations("envs", ("rubricgym.wrappers", "rubricgym.agents", "rubricgym.app")) == []
    reached = {m for _, m in imports(ROOT / "envs" / "judge.py") if m.startswith(("rubricgym.judges", "rubricgym.llm"))}
    # (and the pairwise-agreement rule its reward is, shared with the judge cores in judges.base)
    assert reached == {"rubricgym.judges.ruler", "rubricgym.judges.base", "rubricgym.llm.jsonutil"}


def test_testing_doubles_are_below_nothing():
    # rubricgym.testing serves tests and benchmarks: the library itself never imports it
    for folder in ("rubricgym", "envs", "wrappers", "agents", "integrations"):
        assert violations(folder, ("rubricgym.testing",), skip=("rubricgym/testing/",)) == []


def test_integrations_use_their_trainer_not_ours():
    assert violations("integrations", ("rubricgym.agents",)) == []


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
    for path in sorted((ROOT / "rubricgym").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(APPLICATION + ("rubricgym/testing/",)):
            continue
        bad += [f"{relative}:{line} says {text!r}" for line, text in _strings(path)
                if any(text.startswith(s) for s in UPWARD_STRINGS)]
    assert bad == []


@pytest.mark.parametrize("path", ["rubricgym/registration.py", "rubricgym/chatenv.py", "agents/train.py",
                                  "agents/evaluation.py", "agents/rollout.py", "wrappers/scheme.py", "wrappers/episode.py",
                                  "rubricgym/app/bench.py"])
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
