"""MkDocs hook: the package as Python imports it, for the API pages.

pyproject's ``[tool.setuptools] package-dir`` maps ``envs/``, ``wrappers/`` and ``agents/`` into
``rubricgym`` (whose own folder is ``src/rubricgym``). mkdocstrings reads source folders, not the
install's import finder, so this hook lays the mapped package out once under
``build/docs-package`` (links, not copies) from that one table, and the API pages name the modules
as they import: ``::: rubricgym.agents.train``.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build" / "docs-package"


def build_tree(root: Path = ROOT, tree: Path = TREE) -> Path:
    """Link every folder of package-dir where its package name puts it; returns the tree's root."""
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(tree, ignore_errors=True)
    for package, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        target = tree.joinpath(*package.split("."))
        if target.is_symlink() or target.exists():
            target.unlink() if target.is_symlink() else shutil.rmtree(target)
        if "." not in package:  # a top-level package: a real folder whose entries link to the source
            target.mkdir(parents=True)
            for entry in (root / folder).iterdir():
                if entry.name == "__pycache__":
                    continue
                if entry.is_dir():
                    (target / entry.name).symlink_to(entry.resolve(), target_is_directory=True)
                else:  # a hard link: griffe resolves symbolic ones, and would look for the subpackages beside the source
                    os.link(entry, target / entry.name)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to((root / folder).resolve(), target_is_directory=True)
    return tree


# before mkdocstrings' own on_config, which reads its handler's paths: on a fresh checkout the tree
# must exist by then (a later build only worked because an earlier one had left it behind)
@event_priority(100)
def on_config(config, **kwargs):
    build_tree()
    return config
