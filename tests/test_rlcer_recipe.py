"""RLCER's recipe pieces: checkable rubric items, the simulated verifier, the reference teacher's
cold-start and verifier rows, the per-step diagnostics, bench rows with their own start and
verifier, and a trained verifier checkpoint used as ``local:<checkpoint>``."""

import json

import gymnasium as gym
import numpy as np
import pytest

import rubricgym  # noqa: F401
from rubricgym.app.bench import BenchConfig, BenchRow, _row_kwargs, _selected
from rubricgym.app.cli import main as cli_main
from rubricgym.app.rubric_data import group_references, rubricator_rows, verifier_rows
from rubricgym.judges.base import run_sync
from rubricgym.judges.checkable import OracleVerifier, contains_text, item_truth, problem_expression, reference_rubric
from rubricgym.judges.rlcer import RubricItem, parse_rubric, verify_rollout

from judges import gold


@pytest.mark.parametrize("description, response, truth", [
    ('The response contains "\\boxed{7}"', "so \\boxed{7}", True),
    ('The response contains "\\boxed{7}"', "so \\boxed{17}", False),
    ('The response contains "7"', "it is 17", False),
    ('The response contains "7"', "it is 7.", True),
    ('The response contains "7"', "it is 7.5", False),
    ('The response states "3 + 4 = 7"', "3 +  4\n= 7 done", True),
    ('Mentions "carry"', "no carrying here", False),
    ("The response checks its result", "7", None),
    ('Contains "a" and "b"', "a b", None),  # two quoted texts: not one decidable claim
])
def test_item_truth_is_decided_by_program(description, response, truth):
    assert item_truth(description, response) is truth


def test_checkable_items_survive_the_rubric_json():
    rubric, problem = parse_rubric(json.dumps({"items": reference_rubric("What is 12 + 30?", "42")}))
    assert problem is None
    assert [item.description for item in rubric.items] == [
        'The response contains "\\boxed{42}"', 'The response contains "12 + 30 = 42"', 'The response contains "42"']
    assert [item_truth(i.description, "12 + 30 = 42, \\boxed{42}") for i in rubric.items] == [True, True, True]
    assert [item_truth(i.description, "12 + 30 = 43, \\boxed{43}") for i in rubric.items] == [False, False, False]
    assert problem_expression("Compute 3 * 4 - 2, please.") == "3 * 4 - 2" and problem_expression("No numbers") is None
    assert contains_text("x  =\n1", "x = 1")


def test_oracle_verifier_accuracy_and_unknown_items():
    perfect = OracleVerifier.parse("oracle:1.0")
    assert perfect.verdicts(['contains "\\boxed{5}"', "is clear"], "\\boxed{5}") == [True, None]
    noisy = OracleVerifier.parse("oracle:0.8")
    responses = [f"the answer is {n}" for n in range(2000)]
    verdicts = [noisy.verdicts(['The response contains "7"'], r)[0] for r in responses]
    wrong = sum(v != item_truth('The response contains "7"', r) for v, r in zip(verdicts, responses))
    assert 0.16 < wrong / len(responses) < 0.24
    assert verdicts == [noisy.verdicts(['The response contains "7"'], r)[0] for r in responses]  # reproducible
    with pytest.raises(ValueError, match="accuracy"):
        OracleVerifier.parse("oracle:0.3")
    with pytest.raises(ValueError, match="oracle:<accuracy"):
        OracleVerifier.parse("oracle:high")


def hand_made_group():
    return {"task_id": "t1", "trajectories": [
        {"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": text}]}
        for text in ("2 + 3 = 5. \\boxed{5}", "2 + 3 = 6. \\boxed{6}", "2 + 3 = 5. \\boxed{5}")]}


def test_cold_start_rows_from_a_hand_made_task():
    rows = rubricator_rows([hand_made_group()], {"t1": "5"})
    assert len(rows) == 2  # identical responses make one row
    prompt = rows[1]["prompt"]
    assert prompt[0]["content"].startswith("You write grading rubrics") and "2 + 3 = 6" in prompt[1]["content"]
    rubric, _ = parse_rubric(rows[1]["completion"][0]["content"])
    assert [(i.description, i.score) for i in rubric.items] == [
        ('The response contains "\\boxed{5}"', 3), ('The response contains "2 + 3 = 5"', 2), ('The response contains "5"', 1)]
    verifier = verifier_rows([hand_made_group()], {"t1": "5"}, seed=3)
    for row in verifier:
        listed = row["prompt"][1]["content"].split("Rubric items:\n", 1)[1].splitlines()
        assert [line.split(". ", 1)[1] for line in listed] == row["items"]  # the prompt shows the row's items
        assert row["response"] in row["prompt"][1]["content"]
        verdicts = json.loads(row["completion"][0]["content"])["satisfied"]
        assert len(row["items"]) == len(verdicts) >= 4  # the teacher's three and at least one distractor
        assert verdicts == ["yes" if item_truth(item, row["response"]) else "no" for item in row["items"]]
    assert "no" in json.loads(verifier[0]["completion"][0]["content"])["satisfied"]  # distractors make "no" labels


def test_references_come_from_the_env_that_recorded_the_groups():
    rows = [{"task_id": "gen-L1-train-425"}, {"task_id": "gen-L1-train-363"}]
    assert group_references(rows, "Math-v0", {"levels": (1,)}) == {t["task_id"]: str(gold(t["task_id"])) for t in rows}
    with pytest.raises(ValueError, match="unknown task_id"):
        group_references([{"task_id": "nope"}], "Math-v0", {"levels": (1,)})


def test_validity_and_diagnostics_on_a_hand_made_group():
    """One item tracks correctness (valid), one is met by every response (constant: invalid), one
    is not checkable (no verdict from the simulated verifier)."""
    envs = gym.make_vec("MathRubric-v0", num_envs=4, group_size=4, verifier="oracle:1.0", levels=(1,))
    _, info = envs.reset(seed=0)
    answer = gold(info["task_id"])[0]
    envs.step([f"Step: \\boxed{{{answer}}}", f"Step: \\boxed{{{answer}}}", "Step: \\boxed{-1}", "Step: \\boxed{-2}"])
    rubric = json.dumps({"items": [{"description": f'The response contains "\\boxed{{{answer}}}"', "score": 3},
                                   {"description": 'The response contains "Step"', "score": 1},
                                   {"description": "The response checks its result", "score": 1}]})
    _, rewards, terminated, _, info = envs.step([rubric, rubric, "not a rubric", rubric])
    assert terminated.all()
    stats = info["group_stats"][0]
    assert stats["rubric_valid_fraction"] == pytest.approx(1 / 3) and stats["rubric_items_per_rubric"] == 3
    assert stats["rubric_unverified_fraction"] == pytest.approx(1 / 3) and stats["rubric_format_rate"] == pytest.approx(3 / 4)
    assert stats["rubric_cot_correct_corr"] == pytest.approx(1.0) and stats["rubric_degenerate"] == 0
    assert list(info["reward_components"]["cot"]) == pytest.approx([1, 1, 0, 0])
    assert list(info["role_rewards_rubricator"]) == pytest.approx([4 / 3, 4 / 3, 0, 4 / 3])
    envs.close()


def test_bench_rows_carry_their_own_start_and_verifier():
    rows = (BenchRow("rlvr", "Math-v0"), BenchRow("rlcer+oracle", "MathRubric-v0", {"verifier": "oracle:0.9"}, adapter="ck"))
    config = BenchConfig(envs=("Math-v0",), rows=rows, judge="oracle:1.0")
    assert _selected(config, "Math-v0") == list(rows)
    assert _row_kwargs("Math-v0", rows[1], config, judge="the bench judge")["verifier"] == "oracle:0.9"
    assert _row_kwargs("Math-v0", BenchRow("rlcer", "MathRubric-v0"), config, judge="the bench judge")["verifier"] == "the bench judge"
    with pytest.raises(ValueError, match="one family"):
        BenchConfig(envs=("Math-v0", "RagSupport-v0"), rows=rows)


@pytest.mark.slow
def test_verifier_checkpoint_round_trip(tmp_path, capsys):
    """rubric-data -> sft (one step) -> local:<checkpoint> verifies rubric items through RLCER's call."""
    assert cli_main(["rubric-data", "-o", str(tmp_path / "data")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "data" / "verifier.jsonl").open()]
    assert len(rows) == 1408 and all(json.loads(r["completion"][0]["content"])["satisfied"] for r in rows)
    assert cli_main(["sft", "--data", str(tmp_path / "data" / "verifier.jsonl"), "--max-rows", "4", "--epochs", "1",
                     "--batch-size", "4", "--output-dir", str(tmp_path / "verifier")]) == 0
    assert "checkpoint" in capsys.readouterr().out
    checkpoint = tmp_path / "verifier" / "checkpoint-1"
    assert (checkpoint / "adapter").is_dir() and (checkpoint / "config.json").is_file()
    from rubricgym.llm import LLMConfig, make_llm

    verifier = make_llm(f"local:{checkpoint}", config=LLMConfig(cache_dir=None, timeout_s=300))
    assert "@" in verifier.backend.name  # the adapter's hash is part of the name (and of the cache key)
    items = [RubricItem(description='The response contains "\\boxed{5}"', score=3),
             RubricItem(description='The response contains "7"', score=1)]
    verdicts = run_sync(verify_rollout(verifier, "What is 2 + 3?", "2 + 3 = 5. \\boxed{5}", items, max_fixes=1))
    assert verdicts is not None and len(verdicts) == 2 and all(isinstance(v, bool) for v in verdicts)
    # the checkpoint plays groups of its own (judge-data --adapter), which join the built-in ones as verifier rows
    played = tmp_path / "played.jsonl"
    assert cli_main(["judge-data", "--env", "Math-v0", "--adapter", str(checkpoint), "--groups", "1", "--group-size", "2",
                     "--max-new-tokens", "8", "-o", str(played)]) == 0
    (group,) = [json.loads(line) for line in played.open()]
    assert cli_main(["rubric-data", "--groups", f"math,{played}", "--verifier-items-per-row", "1", "-o", str(tmp_path / "single")]) == 0
    single = [json.loads(line) for line in (tmp_path / "single" / "verifier.jsonl").open()]
    sides = [json.loads(r["completion"][0]["content"])["satisfied"] for r in single]
    assert all(len(v) == 1 for v in sides) and [v[0] for v in sides].count("yes") == [v[0] for v in sides].count("no")
    assert sum(1 for line in (tmp_path / "single" / "rubricator.jsonl").open()) >= 1408 + 1  # the played group's rows joined
    assert group["task_id"] in {json.loads(line)["task_id"] for line in (tmp_path / "single" / "rubricator.jsonl").open()}


def test_probability_verdicts_need_the_in_process_verifier():
    from judges import scripted_judge

    from rubricgym.judges.rlcer import RubricConfig, RubricScorer

    verifier, _ = scripted_judge(lambda messages, i: '{"satisfied": ["yes"]}')
    with pytest.raises(ValueError, match="in-process verifier"):
        RubricScorer(RubricConfig(verifier=verifier, verifier_scoring="probability"))
    with pytest.raises(ValueError, match="'sampled' or 'probability'"):
        RubricScorer(RubricConfig(verifier="oracle:1.0", verifier_scoring="logits"))


@pytest.mark.slow
def test_probability_verdicts_are_the_constrained_greedy_choices():
    """The real default model: a verdict read from the next-token distribution equals the one
    greedy decoding under the reply schema writes, wherever the written reply has kept the frame
    (its spacing) up to that verdict: the contexts are then the same tokens."""
    from rubricgym.judges.rlcer import verifier_messages
    from rubricgym.llm import LLMConfig, make_llm

    verifier = make_llm("local", config=LLMConfig(cache_dir=None, timeout_s=300))
    items = [RubricItem(description=d, score=1) for d in (
        'The response contains "\\boxed{5}"', 'The response contains "7"', "The response is polite", "It explains each step")]
    schema = {"type": "object", "required": ["satisfied"], "properties": {"satisfied": {
        "type": "array", "items": {"type": "string", "enum": ["yes", "no"]}, "minItems": 4, "maxItems": 4}}}
    compared = 0
    for cot in ("2 + 3 = 5, so \\boxed{5}.", "I think it is 7."):
        read = run_sync(verify_rollout(verifier, "What is 2 + 3?", cot, items, scoring="probability"))
        assert read is not None and len(read) == len(items)
        written = run_sync(verifier.complete(verifier_messages("What is 2 + 3?", cot, items),
                                             {"type": "json_object", "schema": schema}, max_tokens=64)).text
        frame = '{"satisfied": ["'
        for verdict in read:
            if not written.startswith(frame):  # the written reply spaced differently from here on
                break
            assert written[len(frame):].startswith("yes" if verdict else "no"), (written, read)
            compared += 1
            frame += ("yes" if verdict else "no") + '", "'
    assert compared >= 2
    assert verifier.usage.completion_tokens >= 2 * len(items)


def test_single_item_verifier_rows_are_balanced():
    """One item per row (as a small verifier is called), as many "yes" rows as "no" rows, each verdict the program's."""
    groups = [hand_made_group(), {**hand_made_group(), "task_id": "t2"}]
    rows = verifier_rows(groups, {"t1": "5", "t2": "5"}, seed=1, items_per_row=1, balance=True)
    verdicts = [json.loads(r["completion"][0]["content"])["satisfied"] for r in rows]
    assert all(len(v) == 1 == len(r["items"]) for v, r in zip(verdicts, rows))
    assert [v[0] for v in verdicts].count("yes") == [v[0] for v in verdicts].count("no") > 0
    assert all(v[0] == ("yes" if item_truth(r["items"][0], r["response"]) else "no") for v, r in zip(verdicts, rows))
    unbalanced = verifier_rows(groups, {"t1": "5", "t2": "5"}, seed=1, items_per_row=2)
    assert all(1 <= len(r["items"]) <= 2 for r in unbalanced)
    assert sum(len(r["items"]) for r in unbalanced) == sum(len(r["items"]) for r in verifier_rows(groups, {"t1": "5", "t2": "5"}))
    with pytest.raises(ValueError, match="balance needs items_per_row=1"):
        verifier_rows(groups, {"t1": "5", "t2": "5"}, balance=True)
    with pytest.raises(ValueError, match="at least 1"):
        verifier_rows(groups, {"t1": "5", "t2": "5"}, items_per_row=0)


def test_verifier_items_per_call_splits_a_groups_items():
    """Every distinct item on every distinct response, in calls of at most ``items_per_call`` items."""
    from judges import scripted_judge

    from rubricgym.judges.rlcer import RubricConfig, RubricScorer, RubricSet, fill_satisfaction

    def reply(messages, i):  # satisfied when the quoted text is in the response: the program's verdicts
        task = messages[-1]["content"]
        response = task.split("Response:\n", 1)[1].split("\n\nRubric items:", 1)[0]
        items = task.split("Rubric items:\n", 1)[1].splitlines()
        return json.dumps({"satisfied": ["yes" if item_truth(line.split(". ", 1)[1], response) else "no" for line in items]})

    verifier, backend = scripted_judge(reply)
    items = [RubricItem(description=f'The response contains "{text}"', score=1) for text in ("5", "6", "2 + 3")]
    sets = [RubricSet(items=items[:2], format_ok=True), RubricSet(items=items[1:], format_ok=True)]
    cots = ["2 + 3 = 5", "2 + 3 = 6", "2 + 3 = 5"]
    assert run_sync(fill_satisfaction(sets, "What is 2 + 3?", cots, verifier, items_per_call=1)) == 0
    assert len(backend.requests) == 3 * 2  # three distinct items on two distinct responses, one item a call
    assert sets[0].satisfaction.tolist() == [[1, 0, 1], [0, 1, 0]] and sets[1].satisfaction.tolist() == [[0, 1, 0], [1, 1, 1]]
    with pytest.raises(ValueError, match="verifier_items_per_call must be at least 1"):
        RubricScorer(RubricConfig(verifier="oracle:1.0", verifier_items_per_call=0))


def test_informative_valid_fraction_skips_degenerate_groups():
    """Validity is decidable only where correctness varies: an all-right group has no informative fraction."""
    from rubricgym.judges.rlcer import RubricSet, rlcer_rewards

    item = RubricItem(description='The response contains "5"', score=1)
    tracking = RubricSet(items=[item], format_ok=True, satisfaction=np.array([[1, 0, 1, 0]]))
    mixed = rlcer_rewards([tracking], [True, False, True, False], [1, 0, 1, 0])
    assert mixed.stats["valid_fraction"] == mixed.stats["informative_valid_fraction"] == 1.0
    every = RubricSet(items=[item], format_ok=True, satisfaction=np.array([[1, 1, 1, 1]]))
    all_right = rlcer_rewards([every], [True] * 4, [1] * 4)
    assert all_right.degenerate and all_right.stats["valid_fraction"] == 0.0
    assert "informative_valid_fraction" not in all_right.stats


def test_bench_reuses_rows_measured_with_the_same_knobs_and_budget(tmp_path, capsys):
    """Rows of an earlier run's JSON are taken when their env, knobs, start, budget and provenance
    (commit, config, packages) match; the table is rewritten with intervals recomputed over the
    rows of this run."""
    from rubricgym.app.bench import _reusable, _saved_rows, row_provenance, run_bench

    rows = (BenchRow("rlvr", "Math-v0"), BenchRow("rlcer+oracle", "MathRubric-v0", {"verifier": "oracle:0.9"}, adapter="ck"))
    config = BenchConfig(envs=("Math-v0",), rows=rows, judge="oracle:1.0", steps=2, eval_tasks=4, resamples=100)
    budget = {f"budget_{k}": v for k, v in config.budget("Math-v0").items()}
    earlier = [{"suite": "Math-v0", "scheme": r.name, "env": r.env_id, "knobs": r.knobs, "adapter": r.adapter, **budget,
                "seeds": [0], "held_out_before": 0.25, "held_out_after": after, "held_out_after_per_seed": [after],
                "mean_train_reward": 0.0, "mean_train_accuracy": 0.5, "policy_completion_tokens": 10,
                "judge_failed_groups": 0, "rubric_valid_fraction": None, "judge_calls": 0, "judge_prompt_tokens": 0,
                "judge_completion_tokens": 0, "judge_failures": 0, "minutes": 1.0,
                "solved": [solved], "before_solved": [1, 0, 0, 0], "provenance": row_provenance("Math-v0", r, config)}
               for r, after, solved in zip(rows, (0.5, 1.0), ([1, 1, 0, 0], [1, 1, 1, 1]))]
    saved_file = tmp_path / "earlier.json"
    saved_file.write_text(json.dumps({"config": {"steps": 2, "eval_tasks": 4, "seeds": [0], "judge": "oracle:1.0"},
                                      "rows": earlier, "curves": {}}))
    reuse = BenchConfig(**{**config.__dict__, "reuse": (str(saved_file),), "output_dir": str(tmp_path), "results_name": "again"})
    saved = _saved_rows(reuse)
    assert _reusable(saved, "Math-v0", rows[1], reuse) is not None
    unproven = {key: ({k: v for k, v in row.items() if k != "provenance"}, curves, judge) for key, (row, curves, judge) in saved.items()}
    assert _reusable(unproven, "Math-v0", rows[1], reuse) is None  # a row without its provenance is never taken
    assert _reusable(saved, "Math-v0", BenchRow("rlcer+oracle", "MathRubric-v0", {"verifier": "oracle:0.8"}, adapter="ck"),
                     reuse) is None  # other knobs
    assert _reusable(saved, "Math-v0", BenchRow("rlcer+oracle", "MathRubric-v0", {"verifier": "oracle:0.9"}), reuse) is None
    assert not _saved_rows(BenchConfig(**{**reuse.__dict__, "steps": 3}))  # another budget: nothing is reused
    other_judge = BenchConfig(**{**reuse.__dict__, "judge": "oracle:0.7"})
    assert _reusable(_saved_rows(other_judge), "Math-v0", rows[0], other_judge) is not None  # RLVR's row has no judge
    assert _reusable(_saved_rows(other_judge), "Math-v0", rows[1], other_judge) is None  # a judged row keeps its judge
    result = run_bench(reuse)  # every row reused: nothing trains
    assert "reused from an earlier run" in capsys.readouterr().out
    assert [r["scheme"] for r in result] == ["rlvr", "rlcer+oracle"] and all(r["reused"] for r in result)
    assert result[1]["difference"]["mean"] == pytest.approx(0.5) and result[1]["gain"]["mean"] == pytest.approx(0.75)
    assert (tmp_path / "again.md").is_file() and "rlcer+oracle" in (tmp_path / "again.md").read_text()
