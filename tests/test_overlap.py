"""Judging overlapped with generation (rollout waves) and one-step off-policy rollouts."""

import time

import pytest
from conftest import require

from judges import reply_scores, scripted_judge

pytestmark = pytest.mark.slow
require("peft", "agents")


def _trainer(tmp_path, judge, **kw):
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer

    config = TrainConfig(env="MathRuler-v0", env_kwargs={"levels": (1,), "judge": judge, "combine": "replace"},
                         steps=2, group_size=2, groups_per_step=3, eval_tasks=0, checkpoint_every=0, record_groups=0,
                         report_to=(), show_completions=0, output_dir=str(tmp_path), seed=1,
                         policy=PolicyConfig(max_new_tokens=8, cpu_threads="fixed"), **kw)
    return Trainer(config)


def _timed(trainer, log):
    generate = trainer.policy._generate

    def timed_generate(*args, **kwargs):
        started = time.monotonic()
        try:
            return generate(*args, **kwargs)
        finally:
            log.append(("generate", started, time.monotonic()))

    trainer.policy._generate = timed_generate


def test_waves_overlap_judging_with_generation_and_score_the_same(tmp_path):
    results = {}
    for overlap in (False, True):
        log = []

        def script(messages, i, log=log):
            log.append(("judge", time.monotonic(), None))
            return reply_scores(messages, scorer=lambda body: (len(body) % 7) / 7)

        judge, backend = scripted_judge(script)
        backend.delay_s = 1.0
        trainer = _trainer(tmp_path / str(overlap), judge, rollout_waves=3, overlap_judging=overlap)
        _timed(trainer, log)
        batch = trainer._rollouts()
        # the scripted backend waits its delay, then asks the script: a call spans the second before it
        judged = [(start - 1.0, start) for kind, start, _ in log if kind == "judge"]
        generated = [(start, end) for kind, start, end in log if kind == "generate"]
        overlapping = sum(1 for g0, g1 in generated for j0, j1 in judged if g0 < j1 - 0.05 and j0 < g1 - 0.05)
        results[overlap] = ([round(t.reward, 9) for t in batch.turns], [t.sample.completion_ids for t in batch.turns],
                            overlapping, len(judged), sorted({g.task_id for g in batch.groups}))
        trainer.envs.close()
    assert results[False][0] == results[True][0] and results[False][1] == results[True][1]  # same samples, same rewards
    assert results[False][4] == results[True][4] and len(results[True][4]) == 3
    assert results[False][3] == results[True][3] == 3  # one judge call per group
    assert results[False][2] == 0 and results[True][2] >= 1  # generation ran during a judge call only with overlap


def test_waves_play_the_tasks_of_one_env(tmp_path):
    judge, _ = scripted_judge()
    waves = _trainer(tmp_path / "w", judge, rollout_waves=3)
    single = _trainer(tmp_path / "s", judge)
    assert sorted({g.task_id for g in waves._rollouts().groups}) == sorted({g.task_id for g in single._rollouts().groups})


def test_off_policy_rollouts_are_one_update_stale_and_logged(tmp_path):
    judge, _ = scripted_judge(lambda messages, i: reply_scores(messages, scorer=lambda body: (len(body) % 7) / 7))
    trainer = _trainer(tmp_path, judge, off_policy=True)
    trainer.config.steps = 3
    stats = [trainer.train_step() for _ in range(3)]
    assert all(s["trained_completions"] > 0 for s in stats)  # scores vary: every step updates
    assert stats[0]["rollout_staleness"] == 0.0  # the first step's rollouts came before any update
    # later steps were generated while the previous update ran (prefetched): at most one update behind
    assert [s["rollouts_prefetched"] for s in stats] == [0.0, 1.0, 1.0]
    assert all(0.0 <= s["rollout_staleness"] <= 1.0 for s in stats[1:])
    assert trainer._prefetch is None and trainer.policy.version == 3
