"""TRL's real GRPOTrainer trains through rubricgym envs (rollout_func): judged groups whole,
multi-turn tool episodes with env tokens masked, reward components logged. Plumbing: the policy is
the tiny random model (the default tokenizer and chat template) and the judge a scripted one; the
learning test with the real model is benchmarks/trl_learning.py, the real judge's is test_judge_eval."""

import math
import os

import pytest
from conftest import require

trl = require("trl", "trl")
require("peft", "agents")

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from judges import reply_scores, scripted_judge, trajectory_blocks  # noqa: E402

from rubricgym.integrations.trl import EnvRollout, env_reward, groups_of  # noqa: E402


def grpo_args(tmp_path, **overrides):
    settings = dict(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
                    max_completion_length=24, max_steps=2, learning_rate=1e-4, logging_steps=1, report_to="none",
                    use_cpu=True, bf16=False, save_strategy="no", seed=0)
    return trl.GRPOConfig(**{**settings, **overrides})


def train(rollout, tmp_path, dataset, model, **overrides):
    from peft import LoraConfig

    from rubricgym.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(model)
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward, train_dataset=dataset,
                              rollout_func=rollout, args=grpo_args(tmp_path, **overrides),
                              peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    trainer.train()
    return trainer, [row for row in trainer.state.log_history if "loss" in row]


def test_grpo_trainer_on_math_ruler_judges_every_group_whole(tmp_path, tiny_model_path):
    # every call seen; its scores vary with the reply, so groups train
    judge, backend = scripted_judge(lambda messages, i: reply_scores(messages, scorer=lambda body: (len(body) % 7) / 7))
    rollout = EnvRollout("MathRuler-v0", levels=(1,), judge=judge, explanation_max_chars=0, max_tokens=128)
    trainer, steps = train(rollout, tmp_path, rollout.dataset(16), tiny_model_path)
    assert len(steps) == 2 and all(math.isfinite(row["loss"]) and math.isfinite(row["grad_norm"]) for row in steps)
    assert rollout.groups_played == 4 and rollout.group_sizes == [2] * 4  # 2 steps x 4 completions / 2 per group
    first_tries = [r for r in backend.requests if not any(m["role"] == "assistant" for m in r)]
    assert len(first_tries) == 4 and all(len(trajectory_blocks(r)) == 2 for r in first_tries)  # each group whole
    for row in steps:
        assert {"rubricgym/reward_components/outcome", "rubricgym/correct", "rubricgym/group_failed"} <= set(row)
        assert row["rewards/env_reward/mean"] == pytest.approx(row["rubricgym/env_reward"], abs=1e-6)
    assert any("rubricgym/reward_components/ruler" in row for row in steps)  # a judged group reached the reward


class ScriptedFirstTurn(EnvRollout):
    """The real model generates every turn except the first turn of even members, which calls a
    tool (so every step has env turns to mask); every sampled turn is recorded."""

    CALL = '<tool_call>{"name": "search_products", "arguments": {"query": "tent"}}</tool_call>'

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sampled, self.outputs = {}, []

    def _generator(self, trainer):
        real = super()._generator(trainer)
        tokenizer = trainer.processing_class
        script = tokenizer.encode(self.CALL, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]

        def generate(contexts):
            out = real(contexts)
            for k, context in enumerate(contexts):
                if tuple(context) in self.first_prompts and k % 2 == 0:
                    out[k] = (list(script), [0.0] * len(script), self.CALL)
                self.sampled.setdefault(tuple(context), []).append(list(out[k][0]))
            return out
        return generate

    def __call__(self, prompts, trainer):
        tokenizer = trainer.processing_class
        from rubricgym.integrations.transcript import TokenTranscript

        self.first_prompts = {tuple(TokenTranscript.start(tokenizer, p).prompt_ids) for p in prompts}
        output = super().__call__(prompts, trainer)
        self.outputs.append(output)
        return output


def test_grpo_trainer_on_tool_use_masks_exactly_the_env_tokens(tmp_path, tiny_model_path):
    rollout = ScriptedFirstTurn("ToolUse-v0", max_turns=2)
    trainer, steps = train(rollout, tmp_path, rollout.dataset(8), tiny_model_path)
    assert len(steps) == 2 and all(math.isfinite(row["loss"]) for row in steps)
    tokenizer = trainer.processing_class
    env_turns = 0
    for output in rollout.outputs:
        for prompt, completion, mask, logprobs in zip(output["prompt_ids"], output["completion_ids"],
                                                      output["env_mask"], output["logprobs"]):
            assert len(completion) == len(mask) == len(logprobs)
            # walk the sequence: every run of mask-1 tokens is exactly what was sampled for that context,
            # and every mask-0 run is the env's turn (the rendered tool result), never sampled text
            position = 0
            while position < len(completion):
                # members of a group share their first context: the run is one of the samples drawn there
                candidates = rollout.sampled[tuple(prompt + completion[:position])]
                sampled = next(c for c in candidates if completion[position:position + len(c)] == c)
                assert mask[position:position + len(sampled)] == [1] * len(sampled)
                position += len(sampled)
                env_end = position
                while env_end < len(mask) and mask[env_end] == 0:
                    env_end += 1
                if env_end > position:
                    env_text = tokenizer.decode(completion[position:env_end])
                    assert "Tool result (search_products)" in env_text and env_text.rstrip().endswith("assistant")
                    assert all(lp == 0.0 for lp in logprobs[position:env_end])
                    env_turns += 1
                position = env_end
    assert env_turns >= 4  # the scripted tool calls of 2 steps x 2 groups were answered by the env
    for row in steps:
        assert {"rubricgym/reward_components/outcome", "rubricgym/reward_components/progress", "rubricgym/turns"} <= set(row)
        assert row["rubricgym/turns"] > 1.0


def test_whole_group_checks_refuse_split_groups():
    with pytest.raises(ValueError, match="not one prompt's group"):
        groups_of([["a"], ["b"], ["b"], ["c"]], 2)
    assert groups_of([["a"], ["a"], ["b"], ["b"]], 2) == [0, 2]

    class Args:
        per_device_train_batch_size = 3

    class Accelerator:
        num_processes = 2

    class Trainer:
        args, accelerator = Args(), Accelerator()

    from rubricgym.integrations.trl import check_whole_groups

    with pytest.raises(ValueError, match="split a group across processes"):
        check_whole_groups(Trainer(), 2)
    Trainer.accelerator.num_processes = 1
    check_whole_groups(Trainer(), 2)  # one process holds every group whole
