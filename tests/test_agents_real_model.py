"""The policy with the real default model file (SmolLM2-135M-Instruct from the GGUF, fp32 CPU)."""

import pytest
from conftest import require  # noqa: E402
import torch

pytestmark = pytest.mark.slow

require("peft", "agents")


def test_real_model_logprobs_match_and_one_grpo_step():
    import gymnasium as gym

    import rubricgym  # noqa: F401
    from rubricgym.agents.grpo import GRPO
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.rollout import collect_rollouts

    torch.manual_seed(0)
    policy = Policy(PolicyConfig(max_new_tokens=16, device="cpu"))
    assert policy.dtype == torch.float32 and policy.has_adapter
    envs = gym.make_vec("Math-v0", num_envs=4, group_size=2, levels=(1, 5))  # two prompt lengths: left padding
    batch = collect_rollouts(envs, policy, seed=3)
    samples = [t.sample for t in batch.turns]
    assert len({len(s.prompt_ids) for s in samples}) > 1
    tensors = policy.batch_tensors(samples)
    with torch.no_grad():
        recomputed = policy.token_logprobs(tensors)
    sampled = policy.sampled_logprobs_tensor(samples, recomputed)
    mask = tensors["completion_mask"] > 0
    assert (recomputed[mask] - sampled[mask]).abs().max() < 1e-4
    stats = GRPO(policy).update(batch)
    assert stats["groups"] == 2 and stats["trained_completions"] + 2 * stats["zero_variance_groups"] == 4


def test_a_short_warm_start_teaches_the_real_model_the_calculator_call(tmp_path):
    """The default model never calls the calculator by itself; four SFT steps on the scripted
    agent's train-split episodes (``TrainConfig.warm_start``) make it call it on held-out two-digit sums."""
    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer

    kwargs = {"levels": (3,), "tools": ["calculator"]}
    config = TrainConfig(env="Math-v0", env_kwargs=kwargs, steps=0, eval_tasks=0, output_dir=str(tmp_path),
                         warm_start="scripted:calculator", warm_start_steps=4, report_to=("none",),
                         policy=PolicyConfig(cpu_threads="fixed"))
    trainer = Trainer(config)
    held_out = {**kwargs, "split": "test"}
    before = evaluate(trainer.policy, held_out, tasks=8, env_id="Math-v0")
    assert before["tool_call_rate"] == 0.0
    warm = trainer.warm_start()
    assert warm["warm_start_rows"] >= 100 and warm["warm_start_loss"] > 0
    after = evaluate(trainer.policy, held_out, tasks=8, env_id="Math-v0")
    assert after["tool_call_rate"] >= 0.75 and after["valid_call_rate"] >= 0.75 and after["accuracy"] >= 0.5


@pytest.mark.parametrize("greedy", [True, False])
def test_kv_reuse_samples_what_re_reading_the_prompt_samples(greedy):
    """The prefix cache (a group's shared prompt read once, turn 2 read from where turn 1 ended)
    gives the real model the same tokens and log-probs as reading every prompt in full."""
    from rubricgym.agents.policy import Policy, PolicyConfig

    cached = Policy(PolicyConfig(max_new_tokens=24, device="cpu", cpu_threads="fixed"))
    plain = Policy.wrap(cached.model, cached.tokenizer,  # the same weights, every prompt read in full
                        PolicyConfig(max_new_tokens=24, cpu_threads="fixed", lora_r=0, kv_cache_mb=0))
    assert plain.prefix_cache is None and cached.prefix_cache is not None
    system = {"role": "system", "content": "Use the calculator for arithmetic, then answer in \\boxed{}. " * 6}
    turn1 = [[system, {"role": "user", "content": q}] for q in ("What is 37 + 45?", "What is 91 - 18?") for _ in range(4)]
    seeds = list(range(100, 108))
    first = cached.sample(turn1, greedy=greedy, seeds=seeds)
    assert cached.prefix_cache.read_tokens < sum(len(s.prompt_ids) for s in first) / 3  # each group prompt read once
    turn2 = [c + [{"role": "assistant", "content": s.text}, {"role": "user", "content": "Tool result (calculator): 82"}]
             for c, s in zip(turn1, first)]
    cached.prefix_cache.reused_tokens = cached.prefix_cache.read_tokens = 0
    second = cached.sample(turn2, greedy=greedy, seeds=seeds)
    assert cached.prefix_cache.reused_tokens > 3 * cached.prefix_cache.read_tokens  # turn 2 mostly came from the cache
    for mine, theirs in ((first, plain.sample(turn1, greedy=greedy, seeds=seeds)),
                         (second, plain.sample(turn2, greedy=greedy, seeds=seeds))):
        for a, b in zip(mine, theirs):
            assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4
