"""`rubricgym bench` machinery on a tiny budget (the real default model, two schemes, one step)."""

import json

import pytest
from conftest import require  # noqa: E402

pytestmark = pytest.mark.slow
require("peft", "agents")


def test_bench_writes_table_plot_and_command(tmp_path):
    from rubricgym.app.bench import BenchConfig, run_bench

    judge_free = ("rlvr", "function")
    config = BenchConfig(envs=("Math-v0",), schemes=judge_free, steps=1, group_size=2, groups_per_step=1,
                         eval_tasks=4, max_new_tokens=16, output_dir=str(tmp_path), command="rubricgym bench --test")
    rows = run_bench(config, progress=False)
    assert [r["scheme"] for r in rows] == list(judge_free)
    # "before" is the untrained base model: an independent evaluation of fresh weights agrees
    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import Policy, PolicyConfig

    fresh = evaluate(Policy(PolicyConfig(max_new_tokens=16)), {"levels": (1,), "split": "test"}, tasks=4, per_task=True,
                     env_id="Math-v0")
    assert rows[0]["held_out_before"] == rows[1]["held_out_before"] == fresh["accuracy"]
    assert rows[0]["before_solved"] == [int(x) for x in fresh["solved"]]
    assert all(0.0 <= r["held_out_after"] <= 1.0 and r["judge_calls"] == 0 for r in rows)
    # every held-out number has its interval; the reference has no difference, the other scheme does
    for r in rows:
        assert r["mean"]["low"] <= r["held_out_after"] <= r["mean"]["high"]
        assert r["gain"]["mean"] == pytest.approx(r["held_out_after"] - r["held_out_before"])
    assert rows[0]["difference"] is None and rows[1]["difference"]["mean"] == pytest.approx(
        rows[1]["held_out_after"] - rows[0]["held_out_after"])
    table = (tmp_path / "reward_schemes_quick.md").read_text()
    assert "Command: `rubricgym bench --test`" in table and "| Math-v0 | function |" in table
    assert "(reference: rlvr)" in table and "paired 95 % bootstrap" in table
    from rubricgym.app.bench import result_line

    assert result_line(rows).startswith("RESULT schemes=2 Math-v0:rlvr=") and "Math-v0:rlvr_gain_significant=" in result_line(rows)
    assert (tmp_path / "reward_schemes_quick.png").stat().st_size > 1000
    assert json.loads((tmp_path / "reward_schemes_quick.json").read_text())["rows"][0]["scheme"] == "rlvr"


def test_bench_counts_each_judged_schemes_own_calls(tmp_path):
    """Judged schemes get their own uncached client over the given backend: the ruler and
    ruler+rlvr schemes see identical first rollouts, and both pay for (and count) their calls."""
    from judges import reply_scores, scripted_judge
    from rubricgym.app.bench import BenchConfig, run_bench

    judge, backend = scripted_judge(lambda messages, i: reply_scores(messages), cache_dir=None)
    config = BenchConfig(envs=("Math-v0",), schemes=("ruler", "ruler+rlvr"), steps=2, group_size=2,
                         groups_per_step=1, eval_tasks=2, max_new_tokens=8, judge=backend,
                         output_dir=str(tmp_path), command="t", results_name="ruler_pair")
    rows = run_bench(config, progress=False)[1:]  # the reference (rlvr) always runs first
    assert [(r["judge_calls"], r["judge_failed_groups"]) for r in rows] == [(2, 0), (2, 0)]
    assert len(backend.requests) == 4
    # "replace" takes the judge's score alone (0.5 for unmarked replies); "sum" adds the outcome
    assert rows[0]["mean_train_reward"] == 0.5
    assert rows[1]["mean_train_reward"] == 0.5 + 2 * rows[1]["mean_train_accuracy"] - 1
    # a named subset run writes its own files and leaves the default tables alone
    assert sorted(p.name for p in tmp_path.glob("*.*")) == ["ruler_pair.json", "ruler_pair.md", "ruler_pair.png"]


def test_bench_passes_the_judge_scoring_to_ruler_schemes_only():
    from rubricgym.app.bench import BenchConfig, BenchRow, _row_kwargs

    config = BenchConfig(judge_scoring="probability")
    assert _row_kwargs("Math-v0", BenchRow("ruler", "MathRuler-v0", {"combine": "replace"}), config, judge="j")[
        "scoring"] == "probability"
    assert "scoring" not in _row_kwargs("Math-v0", BenchRow("rlvr", "Math-v0"), config, judge="j")
    rubric = _row_kwargs("Math-v0", BenchRow("rubric", "MathRubric-v0"), config, judge="j")
    assert rubric["verifier"] == "j" and "scoring" not in rubric and rubric["levels"] == (1,)
    assert _row_kwargs("RagSupport-v0", BenchRow("ruler", "RagSupportRuler-v0"), BenchConfig(), judge="j")["scoring"] == "sampled"
    with pytest.raises(ValueError, match="scoring must be"):
        BenchConfig(judge_scoring="probabilty")


def test_bench_rows_derive_from_the_registry():
    from rubricgym.app.bench import bench_rows

    rows = {row.name: row for row in bench_rows("Math-v0")}
    assert list(rows)[0] == "rlvr" and {"ruler", "ruler+rlvr", "rubric", "function"} <= set(rows)
    assert rows["ruler"].knobs == {"combine": "replace"} and rows["ruler+rlvr"].knobs == {} and rows["rubric"].env_id == "MathRubric-v0"
    assert [row.name for row in bench_rows("RagSupport-v0")][:3] == ["components", "ruler", "ruler+components"]
