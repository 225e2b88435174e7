"""Every benchmark runs as README writes it: ``python benchmarks/<name>.py --help`` from a fresh
process exits 0 (no script shadows an installed package), and ``--smoke`` (tiny sizes, results
in a scratch folder) ends with its ``RESULT`` line, so a change that breaks a benchmark fails CI
instead of the next reader. ``benchmarks/gpu_check.sh`` needs a GPU and is run by hand there."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))


def run(args: list[str], timeout: float, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RUBRICGYM_RESULTS_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_no_benchmark_is_named_like_an_installed_package():
    shadowing = [name for name in SCRIPTS if importlib.util.find_spec(Path(name).stem) is not None]
    assert not shadowing, f"rename {shadowing}: a script's own folder comes first on sys.path"


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_runs_from_a_fresh_process(script, tmp_path):
    done = run([f"benchmarks/{script}", "--help"], timeout=300, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--smoke" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_setting_runs_and_reports(script, tmp_path, shared_data):
    done = run([f"benchmarks/{script}", "--smoke"], timeout=900, tmp_path=tmp_path)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert result, done.stdout[-2000:]
    assert not (ROOT / "benchmarks" / "results" / "reward_schemes_smoke.md").exists()  # smoke never writes beside the measured


@pytest.mark.slow
def test_claims_report_only_and_one_cell_recomputed(tmp_path, shared_data):
    """claims.py's stored results reprint without recomputing, and one named cell recomputes to the same held-out results."""
    measured = run(["benchmarks/claims.py", "--smoke"], timeout=900, tmp_path=tmp_path)
    assert measured.returncode == 0, measured.stderr[-3000:]
    lines = [line for line in measured.stdout.splitlines() if line.startswith("RESULT order_correction_kept=")]
    reported = run(["benchmarks/claims.py", "--smoke", "--report-only"], timeout=300, tmp_path=tmp_path)
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert reported.stdout.splitlines() == [lines[-1]]  # the same line, nothing trained
    assert "seeds=2" in lines[-1] and "commit=" in lines[-1]
    cell = run(["benchmarks/claims.py", "--smoke", "--cell", "order_correction_kept:order_0.7_corrected:1"], timeout=900,
               tmp_path=tmp_path)
    assert cell.returncode == 0, cell.stderr[-3000:]
    assert "identical=1" in cell.stdout, cell.stdout[-2000:]
    wrong = run(["benchmarks/claims.py", "--smoke", "--cell", "order_correction_kept:order_0.7:9"], timeout=300, tmp_path=tmp_path)
    assert wrong.returncode != 0 and "seeds [0, 1], not 9" in wrong.stderr


@pytest.mark.slow
def test_flat_rewards_smoke_report_only_and_one_cell_recomputed(tmp_path, shared_data):
    """flat_rewards.py end to end on the tiny model (the warm start, the family's judge trained by
    train-judge --env, five rows, two seeds): one RESULT line per family; --report-only reprints it;
    one named cell recomputes to the same held-out results; a cell not measured is refused."""
    measured = run(["benchmarks/flat_rewards.py", "--smoke"], timeout=1200, tmp_path=tmp_path)
    assert measured.returncode == 0, measured.stderr[-3000:]
    lines = [line for line in measured.stdout.splitlines() if line.startswith("RESULT env=ToolUse-v0 ")]
    assert lines and all(f" {row}=" in lines[-1] for row in ("rlvr", "partial", "ruler_trained", "ruler_oracle", "random"))
    assert "seeds=2" in lines[-1] and "zero_variance_rlvr=" in lines[-1] and "judge_pairwise=" in lines[-1]
    stored = json.loads((tmp_path / "flat_rewards.json").read_text())["ToolUse-v0"]
    assert stored["judge"]["profile"]["read_groups"] > 0 and stored["warm_start"]["rows"] > 0
    assert set(stored["table"]) == {"rlvr", "partial", "ruler_trained", "ruler_oracle", "random"}
    reported = run(["benchmarks/flat_rewards.py", "--smoke", "--report-only"], timeout=300, tmp_path=tmp_path)
    assert reported.returncode == 0 and reported.stdout.splitlines() == [lines[-1]]
    cell = run(["benchmarks/flat_rewards.py", "--smoke", "--cell", "ToolUse-v0:partial:1"], timeout=900, tmp_path=tmp_path)
    assert cell.returncode == 0 and "identical=1" in cell.stdout, cell.stdout[-2000:] + cell.stderr[-2000:]
    wrong = run(["benchmarks/flat_rewards.py", "--smoke", "--cell", "ToolUse-v0:partial:9"], timeout=300, tmp_path=tmp_path)
    assert wrong.returncode != 0 and "seeds [0, 1]" in wrong.stderr
