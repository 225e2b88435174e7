"""`rubricgym bench` machinery on a tiny budget and the tiny random model (plumbing: tables,
intervals, few-seed statistics, controls, provenance and reuse; what schemes learn is measured by
the benchmarks with the real model)."""

import json

import pytest
from conftest import require  # noqa: E402

require("peft", "agents")


def test_bench_writes_table_plot_and_command(tmp_path, tiny_model_path):
    from rubricgym.app.bench import BenchConfig, run_bench

    judge_free = ("rlvr", "function")
    config = BenchConfig(envs=("Math-v0",), schemes=judge_free, steps=1, group_size=2, groups_per_step=1,
                         eval_tasks=4, max_new_tokens=16, output_dir=str(tmp_path), command="rubricgym bench --test",
                         model=tiny_model_path, judge="oracle:1.0")  # judge-free rows: no judge is loaded
    rows = run_bench(config, progress=False)
    assert [r["scheme"] for r in rows] == list(judge_free)
    # "before" is the untrained base model: an independent evaluation of fresh weights agrees
    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import Policy, PolicyConfig

    fresh = evaluate(Policy(PolicyConfig(model=tiny_model_path, max_new_tokens=16)), {"levels": (1,), "split": "test"}, tasks=4, per_task=True,
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
    from rubricgym.app.bench_report import result_line

    assert result_line(rows).startswith("RESULT schemes=2 Math-v0:rlvr=") and "Math-v0:rlvr_gain_significant=" in result_line(rows)
    assert (tmp_path / "reward_schemes_quick.png").stat().st_size > 1000
    assert json.loads((tmp_path / "reward_schemes_quick.json").read_text())["rows"][0]["scheme"] == "rlvr"


def test_bench_counts_each_judged_schemes_own_calls(tmp_path, tiny_model_path):
    """Judged schemes get their own uncached client over the given backend: the ruler and
    ruler+rlvr schemes see identical first rollouts, and both pay for (and count) their calls."""
    from judges import reply_scores, scripted_judge
    from rubricgym.app.bench import BenchConfig, run_bench

    judge, backend = scripted_judge(lambda messages, i: reply_scores(messages), cache_dir=None)
    config = BenchConfig(envs=("Math-v0",), schemes=("ruler", "ruler+rlvr"), steps=2, group_size=2,
                         groups_per_step=1, eval_tasks=2, max_new_tokens=8, judge=backend,
                         output_dir=str(tmp_path), command="t", results_name="ruler_pair", model=tiny_model_path)
    rows = run_bench(config, progress=False)[1:]  # the reference (rlvr) always runs first
    assert [(r["judge_calls"], r["judge_failed_groups"]) for r in rows] == [(2, 0), (2, 0)]
    assert len(backend.requests) == 4
    # "replace" takes the judge's score alone (0.5 for unmarked replies); "sum" adds the outcome
    assert rows[0]["mean_train_reward"] == 0.5
    assert rows[1]["mean_train_reward"] == 0.5 + 2 * rows[1]["mean_train_accuracy"] - 1
    # a named subset run writes its own files and leaves the default tables alone
    assert sorted(p.name for p in tmp_path.glob("*.*") if p.is_file()) == ["ruler_pair.json", "ruler_pair.md", "ruler_pair.png"]


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
    # the family's own reward first, then the controls beside it, then the schemes
    assert [row.name for row in bench_rows("RagSupport-v0")][:5] == ["components", "random", "partial", "ruler", "ruler+components"]
    assert [row.name for row in bench_rows("Math-v0")][:3] == ["rlvr", "random", "format"]


def test_controls_are_rows_of_every_family_and_format_of_math():
    from rubricgym.app.bench import bench_rows

    math = {row.name: row for row in bench_rows("Math-v0")}
    assert math["random"].env_id == "MathRandom-v0" and math["format"].env_id == "MathFormat-v0"
    assert "random" in {row.name for row in bench_rows("ToolUse-v0")} and "format" not in {row.name for row in bench_rows("ToolUse-v0")}


def test_three_seeds_give_few_seed_statistics_and_cells_are_reused_only_with_the_same_provenance(tmp_path, tiny_model_path,
                                                                                                monkeypatch):
    """Three seeds: each row carries the t interval over seeds, IQM, P(improvement), MDD and a
    verdict, the RESULT line names seeds and mdd; a rerun reuses the stored rows (same commit,
    config, packages) and says so, and a changed commit reuses nothing."""
    from rubricgym.app import bench, provenance
    from rubricgym.app.bench import BenchConfig, run_bench
    from rubricgym.app.bench_report import result_line

    config = BenchConfig(envs=("Math-v0",), schemes=("rlvr", "random"), steps=1, group_size=2, groups_per_step=1,
                         eval_tasks=3, max_new_tokens=6, seeds=(0, 1, 2), output_dir=str(tmp_path), command="t",
                         results_name="controls", model=tiny_model_path, resamples=200, judge="oracle:1.0")
    rows = run_bench(config, progress=False)
    assert [r["scheme"] for r in rows] == ["rlvr", "random"]
    for row in rows:
        few = row["few_seed"]
        assert few["seeds"] == 3 and len(few["seed_means"]) == 3 and row["provenance"]["commit"]
        assert few["mean"]["mean"] == pytest.approx(row["held_out_after"])
    assert rows[1]["few_seed"]["verdict"] in ("not established", "better", "worse") and rows[1]["few_seed"]["mdd"] is not None
    line = result_line(rows)
    assert "Math-v0:random_p_improvement=" in line and "Math-v0:random_verdict=" in line and "seeds=3" in line and "mdd=" in line
    table = (tmp_path / "controls.md").read_text()
    assert "| Math-v0 | random | 3 |" in table and "Code: `" in table

    stored = str(tmp_path / "controls.json")
    trained = []
    real_train = bench._train_scheme
    monkeypatch.setattr(bench, "_train_scheme", lambda *a, **k: trained.append(a[1].name) or real_train(*a, **k))
    again = run_bench(BenchConfig(**{**config.__dict__, "reuse": (stored,), "results_name": "again"}), progress=False)
    assert trained == [] and all(r["reused"] for r in again)
    assert [r["held_out_after"] for r in again] == [r["held_out_after"] for r in rows]
    monkeypatch.setattr(provenance, "code_version", lambda: "another-commit")
    monkeypatch.setattr(bench, "provenance", lambda config: {**provenance.provenance(config), "commit": "another-commit"})
    run_bench(BenchConfig(**{**config.__dict__, "reuse": (stored,), "results_name": "third", "seeds": (0,)}), progress=False)
    assert trained  # nothing stored matched: trained again


def test_a_run_with_more_seeds_keeps_the_cells_of_a_run_with_fewer(tmp_path, tiny_model_path, monkeypatch):
    """A cell is one row and one seed: its identity does not include the run's other seeds, so
    going from 1 seed to 2 trains only the new seed, and the kept seed's results are the same."""
    from rubricgym.app import bench
    from rubricgym.app.bench import BenchConfig, run_bench

    config = BenchConfig(envs=("Math-v0",), schemes=("rlvr",), steps=1, group_size=2, groups_per_step=1, eval_tasks=3,
                         max_new_tokens=6, seeds=(0,), output_dir=str(tmp_path), command="t", results_name="one",
                         model=tiny_model_path, resamples=200, judge="oracle:1.0")
    first = run_bench(config, progress=False)
    trained = []
    real_train = bench._train_scheme
    monkeypatch.setattr(bench, "_train_scheme", lambda *a, **k: trained.append((a[1].name, a[2])) or real_train(*a, **k))
    second = run_bench(BenchConfig(**{**config.__dict__, "seeds": (0, 1), "results_name": "two"}), progress=False)
    assert trained == [("rlvr", 1)]
    assert second[0]["solved"][0] == first[0]["solved"][0]


def test_two_ray_workers_give_the_sequential_results_and_a_stopped_run_resumes(tmp_path, tiny_model_path, monkeypatch):
    """The seeds x schemes grid fanned out over 2 Ray workers equals the one-process run cell for
    cell; finished cells are kept, so a run that lost one cell computes that cell alone."""
    require("ray", "fanout")
    from rubricgym.app import bench
    from rubricgym.app.bench import BenchConfig, run_bench

    grid = dict(envs=("Math-v0",), schemes=("rlvr", "random"), steps=1, group_size=2, groups_per_step=1, eval_tasks=3,
                max_new_tokens=6, seeds=(0, 1), command="t", model=tiny_model_path, resamples=200, judge="oracle:1.0")
    sequential = run_bench(BenchConfig(**grid, output_dir=str(tmp_path / "one")), progress=False)
    fanned = run_bench(BenchConfig(**grid, output_dir=str(tmp_path / "two"), workers=2), progress=False)
    for a, b in zip(sequential, fanned):
        assert a["solved"] == b["solved"] and a["few_seed"] == b["few_seed"] and a["mean_train_reward"] == b["mean_train_reward"]
    cells = sorted((tmp_path / "one" / ".cells").glob("*.json"))
    assert len(cells) == 1 + 2 * 2  # the untrained weights, then 2 rows x 2 seeds
    lost = next(p for p in cells if "-random-s1-" in p.name)
    lost.unlink()  # as if the run had been killed during this cell
    computed = []
    real = bench.run_cell
    monkeypatch.setattr(bench, "run_cell", lambda env_id, row, seed, *a, **k: computed.append((row and row.name, seed)) or real(env_id, row, seed, *a, **k))
    again = run_bench(BenchConfig(**grid, output_dir=str(tmp_path / "one")), progress=False)
    assert computed == [("random", 1)] and [r["solved"] for r in again] == [r["solved"] for r in sequential]


def test_the_learning_rate_knob_reaches_grpo_and_changes_the_cell_only_when_set(tiny_model_path, monkeypatch):
    """``learning_rate`` 0 keeps GRPO's default and the provenance of cells kept before the knob;
    a rate set is what GRPO's optimiser gets, and a cell with it is another cell."""
    from rubricgym.agents.train import Trainer
    from rubricgym.app import bench
    from rubricgym.app.bench import BenchConfig, BenchRow, row_provenance

    row = BenchRow("rlvr", "Math-v0", {}, None)
    config = BenchConfig(envs=("Math-v0",), steps=1, group_size=2, groups_per_step=1, eval_tasks=2, max_new_tokens=4,
                         model=tiny_model_path, judge="oracle:1.0")
    plain = row_provenance("Math-v0", row, config)
    assert row_provenance("Math-v0", row, BenchConfig(**{**config.__dict__, "learning_rate": 0.0}))["config_hash"] == plain["config_hash"]
    slow = BenchConfig(**{**config.__dict__, "learning_rate": 5e-5})
    assert row_provenance("Math-v0", row, slow)["config_hash"] != plain["config_hash"]
    seen = []
    real_init = Trainer.__init__
    monkeypatch.setattr(Trainer, "__init__", lambda self, c: seen.append(c.grpo.learning_rate) or real_init(self, c))
    oracle = bench.make_llm("oracle:1.0").backend
    bench._train_scheme("Math-v0", row, 0, slow, oracle, progress=False, measure_before=False)
    bench._train_scheme("Math-v0", row, 0, config, oracle, progress=False, measure_before=False)
    assert seen == [5e-5, 2e-4]
