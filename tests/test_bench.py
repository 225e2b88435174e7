"""`rubricgym bench` machinery on a tiny budget (the real default model, two schemes, one step)."""

import json

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("peft")


def test_bench_writes_table_plot_and_command(tmp_path):
    from rubricgym.agents.bench import BenchConfig, run_bench

    judge_free = ("rlvr", "function")
    config = BenchConfig(suites=("math",), schemes=judge_free, steps=1, group_size=2, groups_per_step=1, eval_tasks=4,
                         max_new_tokens=16, output_dir=str(tmp_path), command="rubricgym bench --test")
    rows = run_bench(config, progress=False)
    assert [r["scheme"] for r in rows] == list(judge_free)
    assert rows[0]["held_out_before"] == rows[1]["held_out_before"]  # same base model, measured once
    assert all(0.0 <= r["held_out_after"] <= 1.0 and r["judge_calls"] == 0 for r in rows)
    table = (tmp_path / "reward_schemes_quick.md").read_text()
    assert "Command: `rubricgym bench --test`" in table and "| math | function |" in table
    assert (tmp_path / "reward_schemes_quick.png").stat().st_size > 1000
    assert json.loads((tmp_path / "reward_schemes_quick.json").read_text())["rows"][0]["scheme"] == "rlvr"
