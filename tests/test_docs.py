"""The docs cannot drift: every docstring example of the installed package runs (doctest), and
every Python block of README.md and docs/*.md runs (a block whose first line is ``# skip: <reason>``
needs keys, a GPU or a server, and is skipped with that reason)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import tomllib
from pathlib import Path

import pytest

import rubricgym

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# modules that need an optional trainer at import time are still doctested: CI installs every extra;
# the subpackages are pyproject's (the one declaration of the layout)
SUBPACKAGES = tuple(name.split(".")[1] for name in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
                    if name.count(".") == 1)


def _modules() -> list[str]:
    """Every module of the package, as it is installed (the folders package-dir maps in included)."""
    names = [f"rubricgym.{info.name}" for info in pkgutil.iter_modules([str(Path(rubricgym.__file__).parent)])
             if not info.ispkg and info.name != "__main__"]
    for sub in SUBPACKAGES:
        package = importlib.import_module(f"rubricgym.{sub}")
        names += [package.__name__] + [name for _, name, _ in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(set(names))


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name} (run it with -s to see)"


def _pages() -> list:
    from mktestdocs import grab_code_blocks

    return [pytest.param(page, grab_code_blocks(page.read_text(), lang="python"), id=str(page.relative_to(ROOT)))
            for page in PAGES if grab_code_blocks(page.read_text(), lang="python")]


@pytest.mark.parametrize("page,blocks", _pages())
def test_markdown_python_blocks_run(page, blocks, monkeypatch):
    """A page's blocks run in order in one namespace, as a reader pastes them one after another."""
    monkeypatch.chdir(ROOT)  # blocks read repository files (examples/) as a reader in the checkout would
    namespace: dict = {"__name__": "__docs__"}
    skipped = []
    for index, code in enumerate(blocks):
        first = code.strip().splitlines()[0] if code.strip() else ""
        if first.startswith("# skip:"):
            skipped.append(f"block {index}: {first.removeprefix('# skip:').strip()}")
            continue
        # dont_inherit: a block runs as a reader's paste would, without this file's `from __future__` flags
        exec(compile(code, f"{page.name} block {index}", "exec", dont_inherit=True), namespace)
    if skipped:
        print("skipped, with their reasons:", *skipped, sep="\n  ")


def test_the_docs_have_runnable_python():
    blocks = [code for page in _pages() for code in page.values[1]]
    assert sum(not code.strip().startswith("# skip:") for code in blocks) >= 5


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines; detail belongs in docs/"


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    import shutil
    import subprocess
    import sys

    # as on a fresh clone: the hook lays the package tree out before mkdocstrings reads its paths
    shutil.rmtree(ROOT / "build" / "docs-package", ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "kernel" / "index.html").is_file()
    assert "RewardScheme" in (tmp_path / "site" / "api" / "wrappers" / "index.html").read_text()


def _table(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(f"<!-- {name} -->")[1].split(f"<!-- /{name} -->")[0]


def test_readme_tables_list_every_family_and_scheme():
    import re
    from importlib.metadata import entry_points

    from rubricgym.registration import SCHEMES

    import subprocess
    import sys

    # the families a fresh process registers (tests in this one register demo families of their own)
    listing = subprocess.run([sys.executable, "-c", "import rubricgym\nfor i in rubricgym.ENVS.values():\n"
                              "    print(i.id) if i.base is None else None"], capture_output=True, text=True, check=True)
    families = set(listing.stdout.split())
    assert set(re.findall(r"^\| `([^`]+)` \|", _table("families"), re.M)) == families
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", _table("schemes"), re.M)
    assert {name for name, _ in rows} == {entry.name for entry in entry_points(group="rubricgym.schemes")}
    assert all(SCHEMES[name].suffix == suffix for name, suffix in rows)
