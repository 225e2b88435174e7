"""GRPO / PPO maths on tiny tensors, log-prob consistency, masking, checkpoints (tiny random model)."""

import json
import math

import gymnasium as gym
import pytest
from conftest import require  # noqa: E402
import torch

import rubricgym  # noqa: F401

transformers = require("transformers", "agents")
require("peft", "agents")

from rubricgym.agents.grpo import GRPO, GRPOConfig, group_advantages  # noqa: E402
from rubricgym.agents.losses import aggregate, clipped_token_loss, k3_kl  # noqa: E402
from rubricgym.agents.policy import Policy, PolicyConfig, Sample  # noqa: E402
from rubricgym.agents.ppo import PPO, gae, normalize_by_role  # noqa: E402
from rubricgym.agents.rollout import RolloutBatch, Turn, collect_rollouts  # noqa: E402
from rubricgym.agents.train import TrainConfig, Trainer  # noqa: E402
from rubricgym.testing.tiny import TinyModelConfig, tiny_model as build_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tokenizer():
    from rubricgym.models import default_model_dir

    tok = transformers.AutoTokenizer.from_pretrained(default_model_dir())
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok


def tiny_model(tokenizer, seed=0):
    return build_tiny_model(tokenizer, TinyModelConfig(seed=seed))


def tiny_policy(tokenizer, seed=0, **kw):
    config = PolicyConfig(device="cpu", max_new_tokens=kw.pop("max_new_tokens", 8), lora_r=kw.pop("lora_r", 4), **kw)
    torch.manual_seed(seed)
    return Policy(config, model=tiny_model(tokenizer, seed), tokenizer=tokenizer)


# ---------------------------------------------------------------- advantages and losses by hand

def test_group_advantages_by_hand():
    rewards = torch.tensor([1.0, -1.0, -1.0, -1.0, 2.0, 2.0])
    adv, zero = group_advantages(rewards, [0, 0, 0, 0, 1, 1], scale="group", eps=0.0)
    # group 0: mean -0.5, unbiased std = sqrt((1.5^2 + 3 * 0.5^2) / 3) = 1
    assert adv[:4].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])
    assert adv[4:].tolist() == [0.0, 0.0] and zero.tolist() == [False] * 4 + [True] * 2
    none, _ = group_advantages(rewards, [0, 0, 0, 0, 1, 1], scale="none")
    assert none[:4].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])
    batch, _ = group_advantages(rewards, [0, 0, 0, 0, 1, 1], scale="batch", eps=0.0)
    assert batch[:4].tolist() == pytest.approx((torch.tensor([1.5, -0.5, -0.5, -0.5]) / rewards.std()).tolist())
    # near-equal judge scores: without a floor they become full-size advantages, with one they stay small
    judged = torch.tensor([1.0, 0.9999, 0.2, 0.8])
    raw, _ = group_advantages(judged, [0, 0, 1, 1], eps=0.0)
    floored, _ = group_advantages(judged, [0, 0, 1, 1], eps=0.0, min_std=0.05)
    assert raw[:2].tolist() == pytest.approx([0.7071, -0.7071], abs=1e-3)
    assert floored[:2].abs().max() < 2e-3 and floored[2:].tolist() == pytest.approx(raw[2:].tolist())


def test_clipped_loss_and_aggregation_by_hand():
    old = torch.zeros(2, 3)
    new = torch.log(torch.tensor([[1.5, 1.0, 0.5], [1.1, 0.7, 1.0]]))
    adv = torch.tensor([[1.0], [-2.0]])
    loss, clipped = clipped_token_loss(new, old, adv, 0.2, 0.28)
    # row 0 (A=+1): ratios 1.5 -> clipped at 1.28; 1.0; 0.5 -> min(0.5, 0.8) = 0.5
    # row 1 (A=-2): ratio 1.1 -> -2.2; 0.7 -> min(-1.4, -1.6) = -1.6 (clipped at 0.8); 1.0 -> -2
    assert torch.allclose(loss, torch.tensor([[-1.28, -1.0, -0.5], [2.2, 1.6, 2.0]]))
    assert clipped.tolist() == [[True, False, False], [False, True, False]]
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert float(aggregate(loss, mask, "token", 5, 2, 4)) == pytest.approx((-1.28 - 1.0 + 2.2 + 1.6 + 2.0) / 5)
    assert float(aggregate(loss, mask, "sequence", 5, 2, 4)) == pytest.approx(((-2.28) / 2 + 5.8 / 3) / 2)
    assert float(aggregate(loss, mask, "dr_grpo", 5, 2, 4)) == pytest.approx((-2.28 + 5.8) / (2 * 4))


def test_k3_kl_by_hand():
    logp = torch.log(torch.tensor([0.5, 0.25]))
    ref = torch.log(torch.tensor([0.25, 0.25]))
    kl = k3_kl(logp, ref)
    assert kl.tolist() == pytest.approx([0.5 - math.log(0.5) - 1, 0.0])


def test_gae_and_role_normalisation_by_hand():
    rewards = torch.tensor([[0.0, 0.0, 0.0, 2.0]])
    values = torch.tensor([[0.0, 1.0, 1.5, 1.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])  # first column is prompt padding
    adv, ret = gae(rewards, values * mask, mask, gamma=0.9, lam=0.5)
    # t3: 2 - 1 = 1; t2: 0 + 0.9*1 - 1.5 + 0.45*1 = -0.15; t1: 0 + 0.9*1.5 - 1 + 0.45*(-0.15) = 0.2825
    assert torch.allclose(adv, torch.tensor([[0.0, 0.2825, -0.15, 1.0]]))
    assert torch.allclose(ret, torch.tensor([[0.0, 1.2825, 1.35, 2.0]]))
    a = torch.tensor([[1.0, 3.0], [10.0, 30.0]])
    m = torch.ones(2, 2)
    per_role = normalize_by_role(a, m, ["reasoner", "rubricator"], per_role=True)
    assert torch.allclose(per_role, torch.tensor([[-0.7071, 0.7071], [-0.7071, 0.7071]]), atol=1e-4)


# ---------------------------------------------------------------- policy: log-probs, KL, masks

def test_sampling_logprobs_equal_training_logprobs_with_left_padding(tokenizer):
    policy = tiny_policy(tokenizer, max_new_tokens=12, temperature=0.7)
    conversations = [[{"role": "user", "content": "Hi"}],
                     [{"role": "system", "content": "A much longer system prompt " * 8}, {"role": "user", "content": "What is 3 + 4?"}],
                     [{"role": "user", "content": "Two words"}]]
    samples = policy.sample(conversations)
    lengths = {len(s.prompt_ids) for s in samples}
    assert len(lengths) == 3  # prompts of different lengths: the batch is left-padded
    tensors = policy.batch_tensors(samples)
    with torch.no_grad():
        recomputed = policy.token_logprobs(tensors)
    sampled = policy.sampled_logprobs_tensor(samples, recomputed)
    mask = tensors["completion_mask"] > 0
    assert mask.sum() == sum(len(s.completion_ids) for s in samples)
    assert torch.allclose(recomputed[mask], sampled[mask], atol=1e-4), (recomputed[mask] - sampled[mask]).abs().max()


def test_our_greedy_decoding_equals_transformers_generate_on_a_left_padded_batch(tokenizer):
    """The decoding loop (rubricgym.sampling) that replaced ``generate``: same greedy tokens,
    rows of different prompt lengths in one batch, rows leaving the batch as they stop."""
    from rubricgym.sampling import generate_with_logprobs, left_pad

    policy = tiny_policy(tokenizer, max_new_tokens=10)
    prompts = [policy.encode_prompt([{"role": "user", "content": text}]) for text in ("Hi", "What is 3 + 4? " * 5, "x")]
    ours = generate_with_logprobs(policy.model, tokenizer, prompts, 10, greedy=True, stop_ids=policy.stop_ids)
    ids, mask = left_pad(prompts, tokenizer.pad_token_id)
    with torch.no_grad():
        theirs = policy.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=False,
                                       eos_token_id=policy.stop_ids, pad_token_id=tokenizer.pad_token_id)
    for row, generated in enumerate(ours):
        assert theirs[row, ids.shape[1]:].tolist()[:len(generated.completion_ids)] == generated.completion_ids


def test_a_shared_prompt_read_once_gives_the_same_logprobs_and_gradient(tokenizer):
    """score_samples reads the prefix every sample shares once (its keys and values, with
    gradient, serve every row) and runs the LM head only on completion positions, a chunk at a
    time: log-probs, entropies and the LoRA gradient equal the full left-padded batch's, for a
    group's completions of different lengths and a one-token one."""
    policy = tiny_policy(tokenizer, seed=3, max_new_tokens=10)
    with torch.no_grad():  # a fresh adapter's B is zero: make the adapter part of the gradient's path
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    prompt = policy.encode_prompt([{"role": "system", "content": "Think, then answer. " * 4},
                                   {"role": "user", "content": "What is 12 + 30?"}])
    samples = policy.sample_ids([prompt] * 3) + [Sample(prompt, [33], [0.0], "B", False)]
    policy.model.train()

    def gradient(logprobs, mask):
        policy.model.zero_grad()
        (logprobs * mask).sum().backward()
        return torch.cat([p.grad.flatten() for p in policy.trainable_parameters()])

    from rubricgym.agents.policy import _plain_frozen_head

    base = policy.model.get_base_model()
    assert _plain_frozen_head(base, base.get_output_embeddings())  # the chunked head path is the one tested
    tensors = policy.batch_tensors(samples)
    full = policy.score_tokens(tensors, entropy=True)
    full_grad = gradient(full.logprobs, tensors["completion_mask"])
    shared, mask = policy.score_samples(samples, entropy=True)
    assert mask.shape[1] < tensors["input_ids"].shape[1] - len(prompt) + 2  # the prompt is not in the rows
    assert torch.equal(tensors["completion_mask"][:, -mask.shape[1]:], mask)
    at = mask.bool()
    assert torch.allclose(full.logprobs[:, -mask.shape[1]:][at], shared.logprobs[at], atol=1e-5)
    assert torch.allclose(full.entropy[:, -mask.shape[1]:][at], shared.entropy[at], atol=1e-5)
    shared_grad = gradient(shared.logprobs, mask)
    assert full_grad.norm() > 0 and (full_grad - shared_grad).norm() < 1e-4 * full_grad.norm()
    # nothing shared (one sample, or prompts that part at once): the rows are the whole sequences
    alone, alone_mask = policy.score_samples(samples[:1])
    assert alone_mask.shape[1] == len(samples[0].prompt_ids) + len(samples[0].completion_ids)


def test_sft_loss_is_the_completion_cross_entropy_with_the_shared_prompt_read_once(tokenizer):
    """sft's loss (its first step, rows sharing a system prompt, one pass of all of them) is the
    token-mean cross-entropy of the completions given their prompts, as the model's own
    labels-loss computes it on each whole row; and a step lowers it."""
    from rubricgym.agents.sft import SFTConfig, encode_row, sft

    policy = tiny_policy(tokenizer, seed=4)
    system = {"role": "system", "content": "Answer with the sum only. " * 4}
    rows = [{"prompt": [system, {"role": "user", "content": f"What is {a} + {b}?"}],
             "completion": [{"role": "assistant", "content": str(a + b)}]} for a, b in ((2, 3), (10, 4), (7, 7))]
    encoded = [encode_row(policy, row, 512) for row in rows]
    expected_sum, tokens = 0.0, 0
    with torch.no_grad():
        for prompt, completion in encoded:
            ids = torch.tensor([prompt + completion])
            labels = ids.clone()
            labels[0, :len(prompt)] = -100
            expected_sum += float(policy.model(input_ids=ids, labels=labels).loss) * len(completion)
            tokens += len(completion)
    history = sft(policy, rows, SFTConfig(epochs=2, batch_size=3, micro_batch_size=3, learning_rate=1e-2), progress=False)
    assert history[0]["loss"] == pytest.approx(expected_sum / tokens, rel=1e-4)
    assert history[1]["loss"] < history[0]["loss"]


def test_a_token_budget_splits_passes_without_changing_the_update(tokenizer):
    """micro_batch_tokens only decides how many rows a pass reads: SFT's losses and weights, and a
    GRPO update's weights, are those of one pass over every row (gradients accumulate exactly)."""
    from rubricgym.agents.batching import micro_batches
    from rubricgym.agents.sft import SFTConfig, sft

    rows = [{"prompt": [{"role": "user", "content": f"What is {a} + {b}? " + "Think. " * a}],
             "completion": [{"role": "assistant", "content": str(a + b)}]} for a, b in ((2, 3), (10, 4), (7, 7), (1, 1))]
    runs = {}
    for budget in (0, 60):
        policy = tiny_policy(tokenizer, seed=5)
        history = sft(policy, rows, SFTConfig(epochs=1, batch_size=4, micro_batch_size=4, micro_batch_tokens=budget,
                                              learning_rate=1e-2), progress=False)
        runs[budget] = (history[0]["loss"], [p.detach().clone() for p in policy.trainable_parameters()])
    assert runs[60][0] == pytest.approx(runs[0][0], rel=1e-5)
    # Adam's first step is lr * g / (|g| + eps): another summation order moves a near-zero gradient's
    # weight by ~1e-5 (measured 1.1e-5 with transformers 5.10), a wrong split by up to 2 * lr = 0.02
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(runs[0][1], runs[60][1]))

    weights = {}
    for budget in (0, 40):
        policy = tiny_policy(tokenizer, seed=6)
        batch = RolloutBatch(turns=[sample_turn(policy, text, 0, reward) for text, reward in
                                    (("2", 1.0), ("5", -1.0), ("2 because 1 + 1 = 2", 1.0), ("no", -1.0))])
        samples = [t.sample for t in batch.turns]
        passes = micro_batches(samples, 8, budget)
        assert (len(passes) > 1) == bool(budget)
        GRPO(policy, GRPOConfig(learning_rate=1e-2, micro_batch_tokens=budget)).update(batch)
        weights[budget] = [p.detach().clone() for p in policy.trainable_parameters()]
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(weights[0], weights[40]))


def test_kl_is_zero_for_a_fresh_adapter(tokenizer):
    policy = tiny_policy(tokenizer)
    samples = policy.sample([[{"role": "user", "content": "hello"}]] * 2)
    tensors = policy.batch_tensors(samples)
    with torch.no_grad():
        logprobs = policy.token_logprobs(tensors)
    reference = policy.reference_logprobs(tensors)
    kl = k3_kl(logprobs, reference) * tensors["completion_mask"]
    assert float(kl.abs().max()) == 0.0


def sample_turn(policy, text, group, reward, conversation=None):
    conversation = conversation or [{"role": "user", "content": "What is 1 + 1?"}]
    prompt = policy.encode_prompt(conversation)
    completion = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
    tensors = policy.batch_tensors([Sample(prompt, completion, [0.0] * len(completion), text, False)])
    with torch.no_grad():
        logprobs = policy.token_logprobs(tensors)[0, -len(completion):].tolist()
    return Turn(Sample(prompt, completion, logprobs, text, False), env_index=0, group=group, role="reasoner", reward=reward)


def test_zero_variance_groups_contribute_nothing(tokenizer):
    policy = tiny_policy(tokenizer)
    grpo = GRPO(policy, GRPOConfig(learning_rate=1e-2))
    flat = RolloutBatch(turns=[sample_turn(policy, t, 0, 1.0) for t in ("a", "b", "c")])
    before = [p.detach().clone() for p in policy.trainable_parameters()]
    stats = grpo.update(flat)
    assert stats["trained_completions"] == 0 and stats["zero_variance_groups"] == 1
    assert all(torch.equal(a, b) for a, b in zip(before, policy.trainable_parameters()))
    # a mixed batch: the flat group's completions are left out of the loss
    mixed = RolloutBatch(turns=[sample_turn(policy, "2", 0, 1.0), sample_turn(policy, "5", 0, -1.0)]
                         + [sample_turn(policy, t, 1, 1.0) for t in ("a", "b")])
    assert grpo.update(mixed)["trained_completions"] == 2


def test_tool_and_env_tokens_never_enter_the_loss(tokenizer):
    """Multi-turn through the env loop: tool results only ever appear in later prompts."""
    policy = tiny_policy(tokenizer)
    script = iter(['<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>', "\\boxed{42}"])

    class ScriptedPolicy:
        config = policy.config

        def sample(self, conversations, greedy=False, max_new_tokens=None, seeds=None):
            text = next(script)
            prompt = policy.encode_prompt(conversations[0])
            return [Sample(prompt, policy.tokenizer(text, add_special_tokens=False)["input_ids"], [0.0], text, False)]

        def forget(self, samples):
            pass

    envs = gym.make_vec("Math-v0", num_envs=1, group_size=1, tools=["calculator"])
    batch = collect_rollouts(envs, ScriptedPolicy(), options={"task_id": "gen-L1-test-0"})
    assert len(batch.turns) == 2
    second = batch.turns[1].sample
    tensors = policy.batch_tensors([second])
    ids, mask = tensors["input_ids"][0], tensors["completion_mask"][0]
    tool_text = policy.tokenizer.decode(ids[mask == 0])
    trained_text = policy.tokenizer.decode(ids[mask == 1])
    assert "Tool result (calculator): 42" in tool_text and "42" not in trained_text.replace("\\boxed{42}", "")
    assert trained_text == "\\boxed{42}"


def test_checkpoint_resume_gives_the_same_next_step_loss(tokenizer, tmp_path):
    def trainer(folder):
        config = TrainConfig(env_kwargs={"levels": (1,)}, steps=2, group_size=4, groups_per_step=2, eval_tasks=0,
                             output_dir=str(folder), checkpoint_every=0, policy=PolicyConfig(max_new_tokens=6, lora_r=4))
        config.grpo.num_iterations = 2  # the second iteration's ratio departs from 1: the optimiser state matters
        torch.manual_seed(0)
        return Trainer(config, policy=tiny_policy(tokenizer, seed=0, max_new_tokens=6))

    straight = trainer(tmp_path / "a")
    straight.train_step()
    expected = straight.train_step()

    first = trainer(tmp_path / "b")
    first.train_step()
    checkpoint = first.save_checkpoint()
    assert (checkpoint / "adapter" / "adapter_model.safetensors").is_file()
    assert json.loads((checkpoint / "config.json").read_text())["algo"] == "grpo"
    resumed = trainer(tmp_path / "c")
    resumed.load_checkpoint(checkpoint)
    assert resumed.step == 1
    again = resumed.train_step()
    assert again["loss"] == pytest.approx(expected["loss"], abs=1e-5)
    assert again["reward"] == expected["reward"]


def test_ppo_trains_reasoner_and_rubricator_with_one_set_of_weights(tokenizer):
    from judges import scripted_judge

    verifier, _ = scripted_judge(lambda m, i: json.dumps({"satisfied": [True] * m[1]["content"].count("\n1.")}))
    policy = tiny_policy(tokenizer, max_new_tokens=6, role_max_new_tokens={"rubricator": 11})
    envs = gym.make_vec("MathRubric-v0", num_envs=4, group_size=4, verifier=verifier, levels=(1,))
    batch = collect_rollouts(envs, policy, seed=0)
    roles = [t.role for t in batch.turns]
    assert roles.count("reasoner") == 4 and roles.count("rubricator") == 4
    # each role samples under its own budget (a random tiny model rarely stops early)
    lengths = {role: max(len(t.sample.completion_ids) for t in batch.turns if t.role == role) for role in set(roles)}
    assert lengths["reasoner"] <= 6 and 6 < lengths["rubricator"] <= 11
    rubricator_prompt = policy.tokenizer.decode(batch.turns[[i for i, r in enumerate(roles) if r == "rubricator"][0]].sample.prompt_ids)
    assert "grading rubrics" in rubricator_prompt
    ppo = PPO(policy)
    before = [p.detach().clone() for p in policy.trainable_parameters()]
    stats = ppo.update(batch)
    assert math.isfinite(stats["loss"]) and "reward_rubricator" in stats and "reward_reasoner" in stats
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.trainable_parameters()))


def test_trainer_logs_plots_evaluates_and_resumes_its_metrics(tokenizer, tmp_path):
    from rubricgym.agents.evaluation import evaluate

    from judges import reply_scores, scripted_judge

    judge, _ = scripted_judge(lambda m, i: reply_scores(m, scorer=lambda body: min(1.0, len(body) / 400)))
    config = TrainConfig(env="MathRuler-v0", env_kwargs={"levels": (1,), "judge": judge, "combine": "sum"},
                         steps=2, group_size=2, groups_per_step=2, eval_tasks=4, output_dir=str(tmp_path),
                         checkpoint_every=1, policy=PolicyConfig(max_new_tokens=4))
    trainer = Trainer(config, policy=tiny_policy(tokenizer, max_new_tokens=4))
    result = trainer.run(progress=False)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if "reward" in r]
    assert [r["step"] for r in train_rows] == [0, 1]
    assert all(row["trained_completions"] > 0 for row in train_rows)  # distinct judge scores: every group trains
    for row in train_rows:  # the statistics TRL and CleanRL log, and sane values for them
        assert row["entropy"] > 0 and 0 <= row["clip_fraction"] <= 1 and row["approx_kl"] >= 0
    # held-out accuracy is the base env's verified outcome (no judge), on the test split, greedy:
    # an independent evaluation of the same weights gives the same number
    again = evaluate(trainer.policy, {"levels": (1,), "split": "test"}, tasks=4, env_id="Math-v0", per_task=True)
    assert result["after"]["eval_accuracy"] == again["accuracy"] == sum(again["solved"]) / 4
    assert [r["step"] for r in rows if "eval_accuracy" in r] == [0, 2]  # before and after training, nothing between
    assert (tmp_path / "reward_curve.png").stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert (tmp_path / "latest").read_text() == "checkpoint-2" and not list(tmp_path.glob(".*tmp"))
    # resuming from checkpoint-1 cuts the metrics back to what that checkpoint had seen
    trainer.load_checkpoint(tmp_path / "checkpoint-1")
    kept = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert kept == rows[:2] and trainer.step == 1  # the "before" evaluation and step 0


def test_grpo_logs_approx_kl_entropy_and_clip_fraction(tokenizer):
    policy = tiny_policy(tokenizer, max_new_tokens=6)
    envs = gym.make_vec("Math-v0", num_envs=4, group_size=4, levels=(1,))
    batch = collect_rollouts(envs, policy, seed=0)
    batch.turns[0].reward, batch.turns[1].reward = 1.0, -1.0  # a group with signal
    first = GRPO(policy, GRPOConfig(learning_rate=0.0)).update(batch)
    # nothing moved: the sampling and training log-probs agree, so no KL and no clipping
    assert first["approx_kl"] < 1e-6 and first["clip_fraction"] == 0.0 and first["entropy"] > 1.0
    moved = GRPO(policy, GRPOConfig(learning_rate=0.5, num_iterations=3)).update(batch)
    assert moved["approx_kl"] > 1e-4 and moved["clip_fraction"] > 0


@pytest.mark.parametrize("combine", ["replace", "sum"])
def test_learner_trains_on_the_judged_reward_not_the_env_reward(tokenizer, combine):
    """A group wrapper rescoring finished episodes must reach the learner: each turn's return is
    the reward the env loop returned (the judge's score under "replace"), for multi-turn episodes too."""
    from judges import reply_scores, scripted_judge

    by_length = lambda body: min(1.0, len(body) / 400)  # noqa: E731  (distinct scores per reply)
    judge, _ = scripted_judge(lambda m, i: reply_scores(m, scorer=by_length))
    policy = tiny_policy(tokenizer, max_new_tokens=6)
    envs = gym.make_vec("MathRuler-v0", num_envs=4, group_size=4, judge=judge, combine=combine, levels=(1,),
                        tools=["calculator"], max_turns=2)
    batch = collect_rollouts(envs, policy, seed=0)
    envs.close()
    assert len(batch.episode_rewards) == 4
    returns: dict[int, set[float]] = {}
    for turn in batch.turns:
        returns.setdefault(turn.env_index, set()).add(round(turn.reward, 9))
    assert all(len(values) == 1 for values in returns.values())  # every turn of an episode carries its return
    assert [returns[i].pop() for i in range(4)] == pytest.approx(batch.episode_rewards)
    if combine == "replace":
        assert all(0.0 <= r <= 1.0 for r in batch.episode_rewards) and len(set(batch.episode_rewards)) > 1


def test_metrics_reach_weights_and_biases_offline(tokenizer, tmp_path, monkeypatch):
    require("wandb", "wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = TrainConfig(env_kwargs={"levels": (1,)}, steps=1, group_size=2, groups_per_step=1, eval_tasks=0,
                         output_dir=str(tmp_path), checkpoint_every=0, report_to=("wandb",),
                         policy=PolicyConfig(max_new_tokens=4))
    Trainer(config, policy=tiny_policy(tokenizer, max_new_tokens=4)).run(progress=False)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))  # the run's event file
    assert not (tmp_path / "tensorboard").exists()  # only what report_to names
    with pytest.raises(ValueError, match="unknown"):
        Trainer(TrainConfig(report_to=("mlflow",)), policy=None)


def test_warm_start_from_scripted_episodes_or_a_file_then_rl_logs_tool_use(tokenizer, tmp_path):
    from rubricgym.app.cli import main as cli

    kwargs = {"levels": (3,), "tools": ["calculator"]}
    config = TrainConfig(env="Math-v0", env_kwargs=kwargs, steps=1, group_size=2, groups_per_step=2, eval_tasks=2,
                         output_dir=str(tmp_path / "run"), warm_start="scripted:calculator", warm_start_steps=1,
                         warm_start_rows=3, report_to=("none",), checkpoint_every=0)
    trainer = Trainer(config, policy=tiny_policy(tokenizer))
    before = [p.detach().clone() for p in trainer.policy.trainable_parameters()]
    rows = trainer.warm_start_rows()
    # one row per agent turn of each solved episode: the call, then the answer that reads its result
    assert len(rows) == 6 and "<tool_call>" in rows[0]["completion"] and rows[1]["messages"][-1]["role"] == "tool"
    trainer.run(progress=False)
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.policy.trainable_parameters()))
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    warm = next(r for r in logged if "warm_start_loss" in r)
    assert warm["warm_start_rows"] == 6 and "warm_start_eval_tool_call_rate" in warm
    step = next(r for r in logged if "reward" in r)
    assert 0 <= step["tool_call_rate"] <= 1 and "tool_calls_per_episode" in step
    # the same rows from a file that `rubricgym baseline --write-sft` wrote
    path = tmp_path / "rows.jsonl"
    assert cli(["baseline", "--policy", "calculator", "--episodes", "3", "--levels", "3", "--write-sft", str(path)]) == 0

    def shown(rows):  # what each row shows and asks for (tool-call ids are fresh in every episode)
        return [([(m["role"], m["content"]) for m in row["messages"]], row["completion"]) for row in rows]

    assert shown(json.loads(line) for line in path.read_text().splitlines()) == shown(rows)
    config.warm_start = str(path)
    assert shown(trainer.warm_start_rows()) == shown(rows)
    config.warm_start = "scripted:nobody"
    with pytest.raises(ValueError, match="unknown scripted policy"):
        trainer.warm_start_rows()
    config.env, config.warm_start = "WordSort-v0", "scripted:calculator"
    with pytest.raises(ValueError, match="has no scripted agents"):
        trainer.warm_start_rows()


def test_the_thread_rule_gives_the_same_count_on_reruns_idle_or_loaded(tokenizer, monkeypatch):
    """cpu_threads="auto" is a property of the machine, not of its load: the same count with two
    busy processes beside it; a fan-out worker's share comes from RUBRICGYM_CPU_THREADS."""
    import os
    import subprocess
    import sys

    from rubricgym.agents.policy import MAX_AUTO_THREADS, cpu_threads_for

    monkeypatch.delenv("RUBRICGYM_CPU_THREADS", raising=False)
    idle = cpu_threads_for("auto")
    assert idle == max(1, min(len(os.sched_getaffinity(0)), MAX_AUTO_THREADS))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        assert [cpu_threads_for("auto") for _ in range(3)] == [idle] * 3
    finally:
        for process in busy:
            process.kill()
    monkeypatch.setenv("RUBRICGYM_CPU_THREADS", "1")
    assert cpu_threads_for("auto") == 1 and cpu_threads_for("3") == 3 and cpu_threads_for("fixed") is None
    with pytest.raises(ValueError, match="positive number"):
        cpu_threads_for("0")
    before = torch.get_num_threads()
    try:
        policy = tiny_policy(tokenizer, cpu_threads="auto")
        assert policy.cpu_threads == 1 and torch.get_num_threads() == 1  # set once, when the policy is built
    finally:
        torch.set_num_threads(before)
