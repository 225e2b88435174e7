"""Judge training: the JudgeGroup family's reward on hand-made groups, its data sources, teacher
rows, and a trained judge checkpoint that every judge setting loads as ``local:<checkpoint>``."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rubricgym  # noqa: F401
from rubricgym.data import DatasetLoadError
from rubricgym.envs.judge import JudgeGroupEnv, pair_agreement


def member(answer: str, correct: bool | None = None, **extra) -> dict:
    row = {"messages": [{"role": "system", "content": "Answer with the sum."}, {"role": "user", "content": "What is 2 + 3?"},
                        {"role": "assistant", "content": answer}], **extra}
    if correct is not None:
        row["correct"] = correct
    return row


GROUP = {"task_id": "sum", "trajectories": [member("5", True), member("6", False), member("The sum is 5.", True),
                                            member("7", False)]}


def reply(scores: dict[str, float]) -> str:
    return json.dumps({"scores": [{"trajectory_id": k, "score": v} for k, v in scores.items()]})


@pytest.fixture
def env():
    return JudgeGroupEnv(groups=[GROUP])


def test_reward_is_pairwise_agreement_with_the_gold_order(env):
    env.reset(seed=0)
    assert env.step(reply({"t1": 0.9, "t2": 0.1, "t3": 0.8, "t4": 0.2}))[1] == 1.0  # the gold order
    env.reset(seed=0)
    assert env.step(reply({"t1": 0.1, "t2": 0.9, "t3": 0.2, "t4": 0.8}))[1] == 0.0  # reversed
    env.reset(seed=0)
    assert env.step(reply({"t1": 0.5, "t2": 0.5, "t3": 0.5, "t4": 0.5}))[1] == 0.5  # all ties
    env.reset(seed=0)
    # 3 of the 4 (right, wrong) pairs in order: t3 under t4 is the one miss
    _, reward, terminated, _, info = env.step(reply({"t1": 0.9, "t2": 0.1, "t3": 0.3, "t4": 0.4}))
    assert reward == 0.75 and terminated and info["reward_components"] == {"pairwise": 0.75, "format": 1.0}


@pytest.mark.parametrize("bad", ["I like t1 best.", reply({"t1": 1, "t2": 0, "t3": 1}),
                                 reply({"t1": 1, "t2": 0, "t3": 1, "t9": 0}), '{"scores": [{"trajectory_id": "t1"}]}',
                                 reply({"t1": float("nan"), "t2": 0, "t3": 1, "t4": 0}), ""])
def test_a_malformed_reply_gets_the_format_penalty(env, bad):
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(bad)
    assert reward == -0.5 and terminated and info["reward_components"]["format"] == 0.0 and info["judge_error"]


def test_the_observation_is_rulers_prompt_and_the_env_passes_check_env(env):
    from rubricgym.judges.ruler import RulerConfig, build_judge_messages

    obs, info = env.reset(seed=0)
    members = [t["messages"] for t in GROUP["trajectories"]]
    assert obs == build_judge_messages(members, ["t1", "t2", "t3", "t4"], [0, 1, 2, 3],
                                       RulerConfig(explanation_max_chars=0), None)
    assert info["gold"] == [1.0, 0.0, 1.0, 0.0]
    check_env(JudgeGroupEnv(groups=[GROUP]))


def test_reversed_presentation_keeps_the_ids_of_the_members():
    env = JudgeGroupEnv(groups=[GROUP], order="reversed")
    obs, _ = env.reset(seed=0)
    assert obs[1]["content"].index('id="t4"') < obs[1]["content"].index('id="t1"')
    assert env.step(reply({"t4": 0.1, "t3": 0.9, "t2": 0.2, "t1": 0.8}))[1] == 1.0


def test_gold_sources_teacher_scores_llmbar_pairs_and_degenerate_groups(tmp_path):
    judged = {"task_id": "j", "trajectories": [member("a", False, judged={"ruler_score": 0.2}),
                                               member("b", True, judged={"ruler_score": 0.7}),
                                               member("c", True, judged={"ruler_score": 0.9})]}
    same = {"task_id": "s", "trajectories": [member("5", True), member("5.0", True)]}
    env = JudgeGroupEnv(groups=[judged, same])  # the all-correct group carries no order: left out
    assert [t.gold for t in env.tasks] == [(0.2, 0.7, 0.9)]  # the teacher's scores win over correct
    assert JudgeGroupEnv(groups=[judged], gold="correct").tasks[0].gold == (0.0, 1.0, 1.0)
    llmbar = tmp_path / "pairs.json"
    llmbar.write_text(json.dumps([{"input": "Say hi.", "output_1": "Bye.", "output_2": "Hi!", "label": 2}]))
    pair = JudgeGroupEnv(groups=str(llmbar))
    assert pair.tasks[0].gold == (1.0, 0.0) and pair.tasks[0].trajectories[0][-1]["content"] == "Hi!"
    with pytest.raises(ValueError, match="no group with two members of different gold"):
        JudgeGroupEnv(groups=[same])
    with pytest.raises(ValueError, match="row 1: expected 'trajectories'"):
        JudgeGroupEnv(groups=[{"task_id": "x"}])
    with pytest.raises(DatasetLoadError, match="no dataset file at"):
        JudgeGroupEnv(groups=str(tmp_path / "missing.jsonl"))


def test_built_in_math_groups_are_verified_answers_of_disjoint_tasks():
    train, test = gym.make("JudgeGroup-v0").unwrapped, gym.make("JudgeGroup-v0", split="test").unwrapped
    assert len(train.tasks) >= 100 and len(test.tasks) >= 30
    assert all(set(t.gold) == {0.0, 1.0} for t in train.tasks + test.tasks)
    ids = lambda env: {t.id.split("#")[0] for t in env.tasks}  # noqa: E731
    assert ids(train).isdisjoint(ids(test)) and all("train" in i for i in ids(train)) and all("test" in i for i in ids(test))


def test_teacher_rows_score_one_in_the_env_and_an_oracle_teacher_has_its_accuracy():
    from rubricgym.app.judge_training import teacher_rows

    env = gym.make("JudgeGroup-v0").unwrapped
    rows = teacher_rows(env, "verifier")
    assert len(rows) == len(env.tasks)
    for task, row in zip(env.tasks[:20], rows):
        env.reset(options={"task_id": task.id})
        assert env.step(row["completion"][0]["content"])[1] == 1.0
    agreement = []
    for task, row in zip(env.tasks, teacher_rows(env, "oracle:0.8")):
        scores = {s["trajectory_id"]: s["score"] for s in json.loads(row["completion"][0]["content"])["scores"]}
        agreement.append(pair_agreement([scores[i] for i in env.ids(task)], list(task.gold)))
    assert 0.7 < np.mean(agreement) < 0.9  # a 0.8 teacher, read on a few hundred pairs


def test_pointwise_tasks_are_members_with_their_gold_and_rulers_prompt_of_one():
    from rubricgym.judges.ruler import RulerConfig, pointwise_messages

    env = JudgeGroupEnv(groups=[GROUP], pointwise=True)
    assert [t.gold for t in env.tasks] == [(1.0,), (0.0,), (1.0,), (0.0,)]
    obs, _ = env.reset(options={"task_id": "sum#1/t2"})
    assert obs == pointwise_messages(GROUP["trajectories"][1]["messages"], RulerConfig(explanation_max_chars=0))
    assert "The sum is 5." not in obs[-1]["content"] and "6" in obs[-1]["content"]
    assert env.step(reply({"t1": 0.1}))[1] == pytest.approx(0.9)  # 1 - |score - gold|, gold 0
    env.reset(options={"task_id": "sum#1/t1"})
    assert env.step(reply({"t1": 0.1}))[1] == pytest.approx(0.1)
    env.reset(options={"task_id": "sum#1/t1"})
    assert env.step(reply({"t1": 1, "t2": 0}))[1] == -0.5  # a group reply to a one-answer prompt: format penalty
    check_env(gym.make("JudgeGroup-v0", groups=[GROUP], pointwise=True).unwrapped, skip_render_check=True)


def test_pointwise_teacher_rows_are_balanced_and_write_a_readable_first_decimal():
    from rubricgym.app.judge_training import teacher_rows

    env = gym.make("JudgeGroup-v0", pointwise=True).unwrapped
    rows = teacher_rows(env, "verifier", balance=True, seed=1)
    scores = [json.loads(r["completion"][0]["content"])["scores"][0]["score"] for r in rows]
    assert sorted(set(scores)) == [0.1, 0.9] and scores.count(0.9) == scores.count(0.1) == len(rows) // 2
    assert scores.count(0.9) == sum(t.gold[0] == 1.0 for t in env.tasks)  # every good answer, as many bad ones
    oracle = teacher_rows(env, "oracle:0.8")
    assert len(oracle) == len(env.tasks)
    assert {json.loads(r["completion"][0]["content"])["scores"][0]["score"] for r in oracle} <= {x / 10 for x in range(1, 10)}


def test_pointwise_ruler_judges_each_answer_alone_by_probability():
    """RULER with scoring="pointwise" sends each unique answer in its own prompt and reads the
    score's first decimal; a judge without next-token probabilities fails the group clearly."""
    from rubricgym.judges.ruler import RulerConfig, ruler_score_sync

    class Reader:
        name, default_timeout_s = "reader", 5.0

        def __init__(self):
            self.prompts = []

        def expected_scores(self, messages, prefixes):
            self.prompts.append((messages, prefixes))
            return [0.85 if "<assistant>\n5\n" in messages[-1]["content"] else 0.15], 10

    from rubricgym.llm import LLM, LLMConfig

    reader = Reader()
    members = [t["messages"] for t in GROUP["trajectories"]] + [GROUP["trajectories"][0]["messages"]]
    result = ruler_score_sync(members, LLM(reader, LLMConfig(cache_dir=None)), RulerConfig(scoring="pointwise"))
    assert result.scores == [0.85, 0.15, 0.15, 0.15, 0.85] and result.judge_calls == 4  # the repeat judged once
    assert all(p == ['{"scores": [{"trajectory_id": "t1", "score": 0.'] for _, p in reader.prompts)
    assert all(m[-1]["content"].count("<trajectory") == 1 for m, _ in reader.prompts)
    failed = ruler_score_sync(members, LLM(type("Writer", (), {"name": "writer"})(), LLMConfig(cache_dir=None)),
                              RulerConfig(scoring="pointwise"))
    assert failed.failed and "pointwise scoring needs next-token probabilities" in failed.error


def test_reference_guided_tasks_name_the_groups_reference_in_rulers_prompt():
    """reference=True: the prompt is what MathRulerRef-v0's judge reads (RULER's, the rubric naming
    the group's reference); the pointwise members carry it too; rows without one are refused."""
    from rubricgym.app.judge_training import ruler_pairwise, teacher_rows
    from rubricgym.judges.ruler import REFERENCE_BLOCK, RulerConfig, pointwise_messages, with_reference

    group = {**GROUP, "reference": "5"}
    env = JudgeGroupEnv(groups=[group], reference=True, pointwise=True)
    obs, _ = env.reset(options={"task_id": "sum#1/t2"})
    config = with_reference(RulerConfig(explanation_max_chars=0), "5")
    assert obs == pointwise_messages(GROUP["trajectories"][1]["messages"], config)
    assert REFERENCE_BLOCK.format(reference="5") in obs[0]["content"] + obs[-1]["content"]
    plain = JudgeGroupEnv(groups=[group], pointwise=True).reset(options={"task_id": "sum#1/t2"})[0]
    assert "<reference_answer>" not in json.dumps(plain)  # the row's reference is read only when asked for
    assert all("<reference_answer>\n5\n" in " ".join(m["content"] for m in r["prompt"]) for r in teacher_rows(env, "verifier"))
    with pytest.raises(ValueError, match="group sum#1 has none"):
        JudgeGroupEnv(groups=[GROUP], reference=True)

    class Reader:  # a judge that can only compare with the reference it is shown
        name, default_timeout_s = "reader", 5.0

        def expected_scores(self, messages, prefixes):
            text = messages[0]["content"] + messages[-1]["content"]
            shown = text.split("<reference_answer>\n")[1].split("\n")[0] if "<reference_answer>" in text else None
            answer = messages[-1]["content"].split("<assistant>\n")[1].split("\n")[0]
            return [0.9 if shown and shown in answer else 0.1], 10

    from rubricgym.llm import LLM, LLMConfig

    judge = LLM(Reader(), LLMConfig(cache_dir=None))
    guided = JudgeGroupEnv(groups=[group], reference=True)
    assert ruler_pairwise(judge, guided, progress=False, scoring="pointwise")["pairwise"] == 1.0
    blind = JudgeGroupEnv(groups=[group])
    assert ruler_pairwise(judge, blind, progress=False, scoring="pointwise")["pairwise"] == 0.5


def test_counterfactual_references_flip_the_verdict_and_only_the_reference_differs():
    """Each answer again under another task's reference that flips the math verifier's verdict:
    a right answer under a reference it does not match scores 0.1, a wrong one under the reference
    its final number equals scores 0.9; an answer no reference flips gets no second row."""
    from rubricgym.app.judge_training import counterfactual_tasks, teacher_rows

    groups = [{"task_id": "five", "reference": "5", "trajectories": [member("2 + 3 = 5", True), member("It is 6.", False)]},
              {"task_id": "six", "reference": "6", "trajectories": [member("\\boxed{6}", True), member("no idea", False)]}]
    env = JudgeGroupEnv(groups=groups, reference=True, pointwise=True)
    flipped = {task.id: task for task in counterfactual_tasks(env.tasks)}
    assert set(flipped) == {"five#1/t1~cf", "five#1/t2~cf", "six#2/t1~cf"}  # "no idea" matches no reference
    assert (flipped["five#1/t1~cf"].reference, flipped["five#1/t1~cf"].gold) == ("6", (0.0,))
    assert (flipped["five#1/t2~cf"].reference, flipped["five#1/t2~cf"].gold) == ("6", (1.0,))  # "It is 6." under 6
    assert (flipped["six#2/t1~cf"].reference, flipped["six#2/t1~cf"].gold) == ("5", (0.0,))
    rows = teacher_rows(env, "verifier", counterfactual=True)
    assert len(rows) == len(env.tasks) + 3
    by_prompt = {}
    for row in rows:
        answer = row["prompt"][-1]["content"].split("<assistant>")[1]
        verdict = json.loads(row["completion"][0]["content"])["scores"][0]["score"]
        by_prompt.setdefault(answer, set()).add(verdict)
    assert all(verdicts == {0.1, 0.9} for answer, verdicts in by_prompt.items() if "no idea" not in answer)
    with pytest.raises(ValueError, match="pointwise, reference-guided"):
        teacher_rows(JudgeGroupEnv(groups=groups, pointwise=True), "verifier", counterfactual=True)


def test_built_in_math_groups_carry_their_tasks_reference():
    import gymnasium as gym

    env = gym.make("JudgeGroup-v0", split="test", reference=True).unwrapped
    math = gym.make("Math-v0").unwrapped
    for task in env.tasks[:5]:
        math.reset(options={"task_id": task.id.split("#")[0]})
        assert task.reference == math.reference()


@pytest.mark.slow
def test_a_trained_judge_loads_as_local_checkpoint_and_judges_differently(tmp_path):
    """Train one SFT step, load the checkpoint as ``local:<path>``: RULER's scores of the same
    group differ from the untrained judge's; a policy can start GRPO from the same adapter."""
    import torch

    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.sft import SFTConfig, sft
    from rubricgym.app.judge_training import teacher_rows
    from rubricgym.judges.ruler import RulerConfig, ruler_score_sync
    from rubricgym.llm import LLMConfig, make_llm

    env = JudgeGroupEnv(groups=[GROUP])
    policy = Policy(PolicyConfig(lora_r=8))
    history = sft(policy, teacher_rows(env, "verifier") * 4, SFTConfig(epochs=1, batch_size=4, learning_rate=1e-3),
                  tmp_path / "judge", progress=False)
    assert history[-1]["loss"] > 0
    checkpoint = tmp_path / "judge" / "checkpoint-1"
    members = [t["messages"] for t in GROUP["trajectories"]]
    config = RulerConfig(scoring="probability")
    untrained = ruler_score_sync(members, make_llm("local", config=LLMConfig(cache_dir=None)), config)
    trained_judge = make_llm(f"local:{checkpoint}", config=LLMConfig(cache_dir=None))
    assert trained_judge.name.startswith(f"local:{checkpoint}@")  # the cache key carries the weights' hash
    trained = ruler_score_sync(members, trained_judge, config)
    assert not trained.failed and not untrained.failed
    assert max(abs(a - b) for a, b in zip(trained.scores, untrained.scores)) > 1e-3
    pointwise = RulerConfig(scoring="pointwise")  # each answer alone, read by probability, on the real model
    alone = [ruler_score_sync(members, judge, pointwise) for judge in (make_llm("local", config=LLMConfig(cache_dir=None)),
                                                                        trained_judge)]
    assert not any(r.failed for r in alone) and all(r.judge_calls == len(members) for r in alone)
    assert max(abs(a - b) for a, b in zip(*(r.scores for r in alone))) > 1e-3
    restarted = Policy(PolicyConfig(lora_r=8, adapter=str(checkpoint)))
    for name, weight in policy.model.state_dict().items():
        if "lora_" in name:
            assert torch.equal(weight, restarted.model.state_dict()[name]), name


@pytest.mark.slow
def test_train_judge_cli_runs_sft_then_grpo(tmp_path):
    from rubricgym.app.cli import main

    groups = tmp_path / "groups.jsonl"
    groups.write_text(json.dumps(GROUP) + "\n" + json.dumps({**GROUP, "task_id": "other"}) + "\n")
    out = tmp_path / "judge"
    assert main(["train-judge", "--groups", str(groups), "--eval-groups", str(groups), "--method", "sft+grpo",
                 "--sft-epochs", "1", "--sft-batch-size", "2", "--grpo-steps", "1", "--group-size", "2",
                 "--groups-per-step", "1", "--max-new-tokens", "24", "--output-dir", str(out)]) == 0
    curve = json.loads((out / "curve.json").read_text())
    assert [r["stage"] for r in curve] == ["sft", "sft", "grpo"]
    assert (out / "judge_curve.png").stat().st_size > 0 and (out / "grpo" / "checkpoint-1" / "adapter").is_dir()


@pytest.mark.slow
def test_train_judge_cli_trains_a_pointwise_judge_read_by_probability(tmp_path):
    from rubricgym.app.cli import main

    groups = tmp_path / "groups.jsonl"
    groups.write_text(json.dumps(GROUP) + "\n")
    out = tmp_path / "judge"
    assert main(["train-judge", "--groups", str(groups), "--eval-groups", str(groups), "--method", "sft+grpo", "--pointwise",
                 "--sft-epochs", "1", "--sft-batch-size", "2", "--grpo-steps", "1", "--group-size", "2",
                 "--groups-per-step", "1", "--max-new-tokens", "24", "--output-dir", str(out)]) == 0
    curve = json.loads((out / "curve.json").read_text())
    assert [r["stage"] for r in curve] == ["sft", "sft", "grpo"]  # 4 balanced rows, batches of 2: read at 0 and 2
    assert all(0.0 <= r["pairwise"] <= 1.0 and r["valid"] == 1.0 for r in curve)  # nothing to malform


@pytest.mark.slow
def test_sft_continued_without_measuring_the_start_skips_the_step_0_reading(tmp_path, capsys):
    from rubricgym.app.cli import main

    groups = tmp_path / "groups.jsonl"
    groups.write_text(json.dumps(GROUP) + "\n")
    out = tmp_path / "judge"
    assert main(["train-judge", "--groups", str(groups), "--eval-groups", str(groups), "--method", "sft", "--pointwise",
                 "--no-measure-start", "--sft-epochs", "1", "--sft-batch-size", "2", "--output-dir", str(out)]) == 0
    curve = json.loads((out / "curve.json").read_text())
    assert [(r["stage"], r["step"]) for r in curve] == [("sft", 2)]  # the end only: no reading of the start
    assert "at the start not measured -> trained" in capsys.readouterr().out


@pytest.mark.slow
def test_judge_data_records_groups_with_their_verified_outcome(tmp_path):
    from rubricgym.app.cli import main
    from rubricgym.data import read_file

    out = tmp_path / "groups.jsonl"
    assert main(["judge-data", "--env", "WordSort-v0", "--groups", "2", "--group-size", "2", "--max-new-tokens", "8",
                 "-o", str(out)]) == 0
    rows = read_file(out)
    assert len(rows) == 2 and all(len(r["trajectories"]) == 2 for r in rows)
    assert all(isinstance(t["correct"], bool) and t["messages"][-1]["role"] == "assistant"
               for r in rows for t in r["trajectories"])
    assert all(r["task_id"].startswith("ws-train-") for r in rows)
    # the group's reference answer is recorded: reference-guided judges read it
    env = gym.make("WordSort-v0").unwrapped
    for row in rows:
        env.reset(options={"task_id": row["task_id"]})
        assert row["reference"] == env.reference() is not None
