"""Judging overlapped with generation (rollout waves) and one-step off-policy rollouts."""

import time

import pytest
from conftest import require

from judges import reply_scores, scripted_judge

require("peft", "agents")


@pytest.fixture
def trainer_of(tiny_model_path):
    return lambda tmp_path, judge, **kw: _trainer(tmp_path, judge, tiny_model_path, **kw)


def _trainer(tmp_path, judge, model, **kw):
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer

    config = TrainConfig(env="MathRuler-v0", env_kwargs={"levels": (1,), "judge": judge, "combine": "replace"},
                         steps=2, group_size=2, groups_per_step=3, eval_tasks=0, checkpoint_every=0, record_groups=0,
                         report_to=(), show_completions=0, output_dir=str(tmp_path), seed=1,
                         policy=PolicyConfig(model=model, max_new_tokens=8, cpu_threads="fixed"), **kw)
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


def test_waves_overlap_judging_with_generation_and_score_the_same(tmp_path, trainer_of):
    results = {}
    for overlap in (False, True):
        log = []

        def script(messages, i, log=log):
            log.append(("judge", time.monotonic(), None))
            return reply_scores(messages, scorer=lambda body: (len(body) % 7) / 7)

        judge, backend = scripted_judge(script)
        backend.delay_s = 1.0
        trainer = trainer_of(tmp_path / str(overlap), judge, rollout_waves=3, overlap_judging=overlap)
        _timed(trainer, log)
        batch = trainer._rollouts()
        # the scripted backend waits its delay, then asks the script: a call spans the second before it
        judged = [(start - 1.0, start) for kind, start, _ in log if kind == "judge"]
        generated = [(start, end) for kind, start, end in log if kind == "generate"]
        overlapping = sum(1 for g0, g1 in generated for j0, j1 in judged if g0 < j1 - 0.05 and j0 < g1 - 0.05)
        judges_together = sum(1 for a, (a0, a1) in enumerate(judged) for b0, b1 in judged[a + 1:] if a0 < b1 - 0.05 and b0 < a1 - 0.05)
        results[overlap] = ([round(t.reward, 9) for t in batch.turns], [t.sample.completion_ids for t in batch.turns],
                            (overlapping, judges_together, len(generated)), len(judged), sorted({g.task_id for g in batch.groups}))
        trainer.envs.close()
    assert results[False][0] == results[True][0] and results[False][1] == results[True][1]  # same samples, same rewards
    assert results[False][4] == results[True][4] and len(results[True][4]) == 3
    assert results[False][3] == results[True][3] == 3  # one judge call per group
    # one after the other: three generation calls, no judge call during another or during generation;
    # overlapped: the waves' members share calls (one, unless a wave is later than the 0.2 s gather
    # window on a loaded machine) and the groups are judged at the same time
    assert results[False][2] == (0, 0, 3)
    assert results[True][2][1] >= 1 and results[True][2][2] < 3


def test_waves_play_the_tasks_of_one_env(tmp_path, trainer_of):
    judge, _ = scripted_judge()
    waves = trainer_of(tmp_path / "w", judge, rollout_waves=3)
    single = trainer_of(tmp_path / "s", judge)
    assert sorted({g.task_id for g in waves._rollouts().groups}) == sorted({g.task_id for g in single._rollouts().groups})


def test_off_policy_rollouts_are_one_update_stale_and_logged(tmp_path, trainer_of):
    judge, _ = scripted_judge(lambda messages, i: reply_scores(messages, scorer=lambda body: (len(body) % 7) / 7))
    trainer = trainer_of(tmp_path, judge, off_policy=True)
    trainer.config.steps = 3
    stats = [trainer.train_step() for _ in range(3)]
    assert all(s["trained_completions"] > 0 for s in stats)  # scores vary: every step updates
    assert stats[0]["rollout_staleness"] == 0.0  # the first step's rollouts came before any update
    # later steps were generated while the previous update ran (prefetched): at most one update behind
    assert [s["rollouts_prefetched"] for s in stats] == [0.0, 1.0, 1.0]
    assert all(0.0 <= s["rollout_staleness"] <= 1.0 for s in stats[1:])
    assert trainer._prefetch is None and trainer.policy.version == 3


def test_members_at_different_turns_of_different_waves_share_one_batch():
    """Continuous batching: three waves, two in flight. Wave 0's episodes end at turn 2, so wave 2
    starts while wave 1 is at turn 3: the two are sampled in one model call."""
    import gymnasium as gym

    import rubricgym  # noqa: F401
    from rubricgym.agents.policy import PolicyConfig, Sample
    from rubricgym.agents.rollout import collect_waves

    waves = [gym.make_vec("Math-v0", num_envs=2, group_size=2, tools=["calculator"], levels=[3]) for _ in range(3)]
    seed = 11
    question_wave = {}
    for w, envs in enumerate(waves):  # the tasks collect_waves will deal wave w (seed + first group * group size)
        obs, _ = envs.reset(seed=seed + w * 2)
        question_wave.update({obs[i][-1]["content"]: w for i in range(2)})
    calls_before_answer = {0: 1, 1: 3, 2: 0}
    calls = []

    class ToolCallingPolicy:
        config = PolicyConfig()

        def sample(self, conversations, greedy=False, max_new_tokens=None, seeds=None):
            calls.append(len(conversations))
            samples = []
            for conversation in conversations:
                wave = question_wave[next(m["content"] for m in conversation if m["role"] == "user")]
                made = sum(1 for m in conversation if m["role"] == "assistant")
                text = ('<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>'
                        if made < calls_before_answer[wave] else "\\boxed{2}")
                samples.append(Sample([1], [2], [0.0], text, False))
            return samples

        def forget(self, samples):
            pass

    batch = collect_waves(waves, ToolCallingPolicy(), seed, concurrency=2, gather_s=30.0)
    turns_by_call = [sorted({(wave, turn) for wave, _, turn in tags}) for tags in batch.generation_batches]
    assert [(1, 3), (2, 1)] in turns_by_call  # wave 1's third turn and wave 2's first, one call
    assert len(batch.turns) == 2 * (2 + 4 + 1) and calls == [len(tags) for tags in batch.generation_batches]
    assert len(calls) == 4  # turns 1 and 2 of waves 0+1, turn 3 of wave 1 + turn 1 of wave 2, turn 4 of wave 1
