"""Judge groups for any family: a non-math family's recorded groups, with its scripted agents
mixed in (a spread of quality where the policy rarely succeeds), are what JudgeGroup-v0 trains on."""

from __future__ import annotations

import json

import pytest

import rubricgym  # noqa: F401
from rubricgym.registration import family_class


def test_every_family_with_scripted_agents_names_a_spread():
    tool_use = family_class("ToolUse-v0").scripted_agents()
    assert set(tool_use) == {"expert", "partly_right", "harmful"}
    assert {"expert", "partly_right"} <= set(family_class("Math-v0").scripted_agents())
    assert family_class("WordSort-v0").scripted_agents() == {}


def test_tooluse_judge_groups_mix_the_policy_with_scripted_agents(tmp_path, tiny_model_path):
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.app.judge_data import record_groups
    from rubricgym.envs.judge import JudgeGroupEnv

    policy = Policy(PolicyConfig(model=tiny_model_path, lora_r=0, max_new_tokens=8))
    out = record_groups("ToolUse-v0", {}, groups=2, group_size=2, out=tmp_path / "groups.jsonl", policy=policy,
                        scripted_members=3, progress=False)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        ids = [t["id"] for t in row["trajectories"]]
        assert len(ids) == 5 and {"scripted:expert", "scripted:partly_right", "scripted:harmful"} <= set(ids)
        by_id = {t["id"]: t for t in row["trajectories"]}
        # the family's own verifier labels them: the expert solves the task, the others do not
        assert by_id["scripted:expert"]["correct"] is True
        assert by_id["scripted:partly_right"]["correct"] is False and by_id["scripted:harmful"]["correct"] is False
        assert all(t["messages"][0]["role"] == "system" for t in row["trajectories"])
    # members shuffled, seeded: the same recording again gives the same rows, order included
    again = record_groups("ToolUse-v0", {}, groups=2, group_size=2, out=tmp_path / "again.jsonl", policy=policy,
                          scripted_members=3, progress=False)
    assert [[t["id"] for t in json.loads(line)["trajectories"]] for line in again.read_text().splitlines()] == [
        [t["id"] for t in row["trajectories"]] for row in rows]
    env = JudgeGroupEnv(groups=str(out))  # the judge family reads them: every group has members of different gold
    assert len(env.tasks) == 2
    obs, _ = env.reset(seed=0)
    assert "scripted" not in obs[-1]["content"]  # who played a member is never shown to the judge


def test_a_family_without_scripted_agents_says_so(tmp_path, tiny_model_path):
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.app.judge_data import record_groups

    policy = Policy(PolicyConfig(model=tiny_model_path, lora_r=0, max_new_tokens=4))
    with pytest.raises(ValueError, match="no scripted agents"):
        record_groups("WordSort-v0", {}, groups=1, group_size=2, out=tmp_path / "g.jsonl", policy=policy,
                      scripted_members=1, progress=False)


def test_train_judge_on_a_family_records_its_groups_then_trains(tmp_path, tiny_model_path):
    from rubricgym.app.cli import main

    out = tmp_path / "judge"
    assert main(["train-judge", "--env", "ToolUse-v0", "--env-groups", "4", "--env-group-size", "1", "--scripted-members", "2",
                 "--method", "sft", "--sft-epochs", "0.5", "--model", tiny_model_path, "--max-new-tokens", "8",
                 "--output-dir", str(out), "--no-measure-start"]) == 0
    train = [json.loads(line) for line in (out / "groups-train.jsonl").read_text().splitlines()]
    test = [json.loads(line) for line in (out / "groups-test.jsonl").read_text().splitlines()]
    assert (len(train), len(test)) == (4, 4) and all(len(row["trajectories"]) == 3 for row in train + test)
    assert {row["task_id"] for row in train}.isdisjoint({row["task_id"] for row in test})  # held out: the test split
    assert (out / "curve.json").is_file()
