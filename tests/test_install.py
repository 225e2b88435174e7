"""A non-editable install used from the repository root: Python started there puts the root first
on sys.path, and nothing there is named ``rubricgym`` (the kernel is under ``src/``), so it imports
the install, with the folders package-dir maps in (envs, wrappers, agents)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import gymnasium as gym, rubricgym, rubricgym.envs, rubricgym.wrappers
print(rubricgym.__file__)
env = gym.make("MathRuler-v0", judge="oracle:1.0", levels=(1,))
obs, info = env.reset(seed=0)
envs = gym.make_vec("WordSort-v0", num_envs=2, group_size=2)
envs.reset(seed=0)
print("OK", len(rubricgym.ENVS))
"""


@pytest.mark.slow
def test_a_non_editable_install_works_from_the_repository_root(tmp_path):
    target = tmp_path / "site"
    # built from a copy: setuptools writes rubricgym.egg-info into the tree it builds, and one left at
    # the checkout's root would shadow the real install's entry points for every later process there
    source = tmp_path / "source"
    source.mkdir()
    # an editable install (README's commands, CI) leaves its own rubricgym.egg-info at the root: only a new one counts
    before = {(path.name, path.stat().st_mtime_ns) for path in ROOT.glob("*.egg-info")}
    layout = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for name in {"pyproject.toml", "README.md", *(folder.split("/")[0] for folder in layout.values())}:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if (ROOT / name).is_dir() else {}))
    build = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target), str(source)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (target / "rubricgym" / "envs" / "math" / "__init__.py").is_file()  # the wheel maps the folders in
    # -S: no .pth files, so an editable install's finder is not there; the wheel and the other packages are
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *site.getsitepackages()])}
    run = subprocess.run([sys.executable, "-S", "-c", CHECK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    first, last = run.stdout.strip().splitlines()[0], run.stdout.strip().splitlines()[-1]
    assert Path(first).resolve().parent == (target / "rubricgym").resolve()  # the install, not the checkout
    assert last.startswith("OK")
    after = {(path.name, path.stat().st_mtime_ns) for path in ROOT.glob("*.egg-info")}
    assert after == before, "the build wrote into the checkout"
