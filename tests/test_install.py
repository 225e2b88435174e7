"""A non-editable install used from the repository root: Python started there imports the
checkout's source folder `rubricgym/` (a script's or `-c`'s folder is first on sys.path), which
lacks the folders package-dir maps in (envs, wrappers, agents, integrations). It must still work."""

from __future__ import annotations

import os
import site
import subprocess
import sys
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
    build = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target), str(ROOT)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (target / "rubricgym" / "envs" / "math" / "__init__.py").is_file()  # the wheel maps the folders in
    # -S: no .pth files, so an editable install's finder is not there; the wheel and the other packages are
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *site.getsitepackages()])}
    run = subprocess.run([sys.executable, "-S", "-c", CHECK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    first, last = run.stdout.strip().splitlines()[0], run.stdout.strip().splitlines()[-1]
    assert Path(first).resolve().parent == ROOT / "rubricgym"  # the trap: the source folder shadows the install
    assert last.startswith("OK")
