"""LLM policy, rollouts through the env loop, GRPO and PPO trainers."""
