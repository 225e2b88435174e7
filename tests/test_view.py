"""`rubricgym view`: a 2-step judged run becomes one offline HTML report that a real browser
renders with every group of the run, its scores and the judge's reasons."""

from __future__ import annotations

import json
import re
import subprocess

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from conftest import require  # noqa: E402

from judges import reply_scores, scripted_judge

transformers = require("transformers", "agents")


def tiny_run(tmp_path, env="MathRuler-v0", **env_kwargs):
    import torch

    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer
    from rubricgym.models import default_model_dir
    from rubricgym.testing.tiny import tiny_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(default_model_dir())
    torch.manual_seed(0)
    model = tiny_model(tokenizer)
    policy = Policy(PolicyConfig(device="cpu", max_new_tokens=6, lora_r=4), model=model, tokenizer=tokenizer)
    config = TrainConfig(env=env, env_kwargs={"levels": (1,), **env_kwargs}, steps=2, group_size=2, groups_per_step=2,
                         eval_tasks=2, output_dir=str(tmp_path / "run"), checkpoint_every=0, record_groups=-1,
                         policy=PolicyConfig(max_new_tokens=6, lora_r=4))
    Trainer(config, policy=policy).run(progress=False)
    return tmp_path / "run"


def dump_dom(chromium: str, html, screenshot=None) -> str:
    base = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    if screenshot:
        subprocess.run(base + [f"--screenshot={screenshot}", "--window-size=1400,1600", html.as_uri()],
                       capture_output=True, timeout=180, check=True)
    done = subprocess.run(base + ["--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=180, check=True)
    return done.stdout


def test_report_of_a_judged_run_renders_in_a_real_browser(tmp_path, chromium):
    flaky = {"calls": 0}

    def script(messages, i):  # the second judge call fails: the report must show it
        flaky["calls"] += 1
        return "not json at all" if i in (1, 2, 3) else reply_scores(messages, scorer=lambda b: min(1.0, len(b) / 300))

    judge, backend = scripted_judge(script, max_retries=0)
    run = tiny_run(tmp_path, judge=judge, max_fixes=2)
    rows = [json.loads(line) for line in (run / "groups.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["step"] for r in rows} == {0, 1} and all(r["schema"] == 1 for r in rows)
    from rubricgym.app.cli import main

    assert main(["view", str(run)]) == 0
    html = run / "report.html"
    text = html.read_text()
    assert "http://" not in text and "https://" not in text  # nothing to fetch: it opens offline
    dom = dump_dom(chromium, html, screenshot=tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 10_000
    groups = re.findall(r'<div class="group[^"]*" id="group-(\d+)" data-task="([^"]+)" data-failed="(yes|no)"', dom)
    assert len(groups) == len(rows)  # every group of the run is on the page
    assert [task for _, task, _ in groups] == [r["task_id"] for r in rows]
    failed = [r for r in rows if any(t["judged"].get("ruler_failed") for t in r["trajectories"])]
    assert len(failed) == 1 and sum(flag == "yes" for *_, flag in groups) == 1
    for row in rows:
        for t in row["trajectories"]:
            if not t["judged"]["ruler_failed"]:
                assert f'{t["judged"]["ruler_score"]:.3f}' in dom and t["judged"]["ruler_explanation"] in dom
    assert 'id="curves"' in dom and "judge failed" in dom
    # the reward diagnostics of every step (agents/diagnostics.py), in metrics.jsonl and on the page
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "reward" in m]
    assert len(steps) == 2 and all({"group_reward_std", "zero_variance_fraction", "trained_fraction"} <= set(m) for m in steps)
    assert all(0 <= m["zero_variance_fraction"] <= 1 and 0 <= m["trained_fraction"] <= 1 for m in steps)
    assert "within-group reward std" in dom and "zero-variance groups" in dom and "completions that trained" in dom


def test_report_of_rubric_groups_and_of_a_judged_file(tmp_path, chromium):
    from rubricgym.app.cli import main

    verdicts = lambda m, i: json.dumps({"satisfied": ["yes" if "1" in m[1]["content"] else "no"] * m[1]["content"].count("\n1.")})  # noqa: E731
    verifier, _ = scripted_judge(verdicts)
    run = tiny_run(tmp_path, env="MathRubric-v0", verifier=verifier)
    assert main(["view", str(run), "-o", str(tmp_path / "rubrics.html")]) == 0
    dom = dump_dom(chromium, tmp_path / "rubrics.html")
    # the policy's own rubrics, as recorded: one table per group, one "no parseable rubric" row per rubric without items
    recorded = [json.loads(line) for line in (run / "groups.jsonl").read_text().splitlines()]
    rubric_sets = [r for row in recorded for r in (row.get("group_info") or {}).get("rubrics") or []]
    assert rubric_sets and dom.count('class="rubrics"') == sum(bool((row.get("group_info") or {}).get("rubrics"))
                                                                for row in recorded)
    assert dom.count("no parseable rubric") == sum(not r["items"] for r in rubric_sets)
    # each rubric group's diagnostics under its table, as recorded
    assert dom.count('class="rubric-stats"') == dom.count('class="rubrics"')
    first = next((row.get("group_info") or {})["rubric_stats"] for row in recorded if (row.get("group_info") or {}).get("rubrics"))
    assert f"format_rate {first['format_rate']:.2f}" in dom and f"items_per_rubric {first['items_per_rubric']:.2f}" in dom

    judged = tmp_path / "judged.jsonl"
    example = __import__("pathlib").Path(__file__).resolve().parents[1] / "examples" / "refund_group.jsonl"
    judge, _ = scripted_judge(lambda m, i: reply_scores(m))
    from rubricgym.app.judge_file import read_trajectories, write_judged

    labels, trajectories, tools = read_trajectories(str(example))
    from rubricgym.judges.ruler import ruler_score_sync

    result = ruler_score_sync(trajectories, judge)
    write_judged(str(judged), labels, trajectories, tools, result, "scripted")
    assert main(["view", str(judged)]) == 0
    dom = dump_dom(chromium, judged.with_suffix(".html"))
    for label in labels:
        assert f'data-trajectory="{label}"' in dom
