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
