"""Reference-guided RULER (`<Family>RulerRef-v0`, wrappers/ruler_ref.py): a scheme in one file,
derived for every family that records reference answers."""

from __future__ import annotations

import gymnasium as gym
import pytest
from judges import reply_scores, scripted_judge

import rubricgym
from rubricgym.app.cli import main
from rubricgym.registration import scheme_of


def test_derived_for_every_family_with_references_only():
    assert {"MathRulerRef-v0", "RagSupportRulerRef-v0", "WordSortRulerRef-v0"} <= set(rubricgym.ENVS)
    assert "ToolUseRulerRef-v0" not in rubricgym.ENVS and "FunctionCallRulerRef-v0" not in rubricgym.ENVS
    scheme = scheme_of("WordSortRulerRef-v0")
    assert (scheme.name, scheme.judge_knob, rubricgym.ENVS["WordSortRulerRef-v0"].base) == ("ruler_ref", "judge", "WordSort-v0")


def test_the_judge_reads_each_groups_reference_and_plain_ruler_does_not():
    prompts = {}
    for env_id in ("WordSortRulerRef-v0", "WordSortRuler-v0"):
        judge, backend = scripted_judge(lambda messages, i: reply_scores(messages))
        envs = gym.make_vec(env_id, num_envs=4, group_size=2, judge=judge)
        obs, info = envs.reset(seed=3)
        references = [", ".join(sorted(envs.unwrapped.envs[i].unwrapped.task.words)) for i in (0, 2)]
        obs, rewards, terminated, truncated, info = envs.step(["amber"] * 4)
        assert terminated.all() and not info["ruler_failed"].any()
        prompts[env_id] = [m[0]["content"] for m in backend.requests]  # one call per group, the system prompt
        assert len(prompts[env_id]) == 2
    with_ref = prompts["WordSortRulerRef-v0"]
    assert sorted(r.count("<reference_answer>") for r in with_ref) == [1, 1]
    assert {p.split("<reference_answer>\n")[1].split("\n</reference_answer>")[0] for p in with_ref} == set(references)
    assert not any("<reference_answer>" in p for p in prompts["WordSortRuler-v0"])


@pytest.mark.slow
def test_trains_and_evaluates_from_the_cli(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--env", "MathRulerRef-v0", "--judge", "oracle:1.0", "--steps", "1", "--eval-tasks", "4",
                 "--group-size", "2", "--groups-per-step", "1", "--max-new-tokens", "12", "--report-to", "none",
                 "--output-dir", str(out)]) == 0
    assert (out / "metrics.jsonl").is_file()
    assert main(["eval", "--env", "MathRulerRef-v0", "--checkpoint", str(out / "checkpoint-1"), "--tasks", "4"]) == 0
