"""Does TRL's GRPOTrainer learn through rubricgym's rollout function on a CPU? Held-out accuracy before and after.

TRL 1.16 ``GRPOTrainer`` with ``rollout_func=EnvRollout("Math-v0", levels=(<level>,))`` (sums from
the built-in generator) and ``reward_funcs=env_reward``; the default SmolLM2-135M-Instruct with
LoRA (r 16, alpha 32, all linear layers), fp32 on CPU. The TRL settings mirror the project's own
trainer (benchmarks/learning.py): 4 groups of 8 per step (``--micro-batch-size 8``: played at
once, trained in passes of 8 by gradient accumulation, which keeps a multi-turn step's logits in
memory), lr 2e-4 constant, 48 new tokens (per turn), temperature 1.0, no KL (beta 0), token-level
loss ("dapo"), epsilon 0.2 / 0.28, grad clip 1.0. Held-out accuracy: greedy, the generator's ``test`` split, through the env loop (rubricgym's
evaluator on the trained model). Training stops at the time budget (evaluation time excluded).
Writes a curve PNG and a JSON under benchmarks/results/.

With ``--tools calculator`` the env offers the calculator (multi-turn: call, result, answer; TRL
plays the episodes through ``EnvRollout``, tool results masked out of its loss) and, as in
benchmarks/learning.py, the run starts from the same warm start: ``--warm-start-steps`` SFT steps
of rubricgym's trainer on the scripted calculator agent's solved train-split episodes
(``TrainConfig.warm_start``), whose LoRA adapter TRL then trains. Held-out accuracy is then also
measured sampled (pass@1 at temperature 1) with the tool-call rates, before, after the warm start
and after RL, so the two trainers' rows read side by side.

    python benchmarks/trl_learning.py --minutes 20                                # level 1
    python benchmarks/trl_learning.py --level 3 --tools calculator --minutes 20 --micro-batch-size 8

Ends with ``RESULT acc_before=<a> acc_after=<b> minutes=<m> steps=<n>``; with tools also
``acc_warm=.. sampled_before=.. sampled_warm=.. sampled_after=.. tool_call_rate=<c>`` (the sampled
tool-call rate after RL) ``tool_call_rate_warm=..``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

RESULTS = results_dir(__file__)


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rubricgym.agents.evaluation import learning_point, tool_learning_fields
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.integrations.trl import EnvRollout, env_reward
    from rubricgym.models import load_model_and_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--tools", default="", help="comma-separated tools the env offers (calculator); empty: none")
    parser.add_argument("--warm-start-steps", type=int, default=4,
                        help="with --tools: SFT steps on the scripted calculator agent's episodes before RL (0: none)")
    parser.add_argument("--minutes", type=float, default=20.0, help="training time budget (evaluation excluded)")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-tasks", type=int, default=96)
    parser.add_argument("--micro-batch-size", type=int, default=32,
                        help="episodes per forward/backward pass (a multiple of 8; the step still trains 32, by "
                             "gradient accumulation): 8 keeps a multi-turn step's logits in memory")
    parser.add_argument("--seed", type=int, default=0)
    add_smoke_flag(parser, minutes=0.05, max_steps=1, eval_every=1, eval_tasks=4, warm_start_steps=1)
    args = parser.parse_args()
    if args.micro_batch_size not in (8, 16, 32):
        parser.error("--micro-batch-size must be 8, 16 or 32 (whole groups of 8 that divide the step's 32 episodes)")

    tools = [name for name in args.tools.split(",") if name]
    env_kwargs: dict = {"levels": (args.level,), **({"tools": tools} if tools else {})}
    warm = bool(tools) and args.warm_start_steps > 0
    name = "trl_learning" + ("" if args.level == 1 and not tools else f"_L{args.level}") + "".join(f"_{t}" for t in tools)
    peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    if warm:  # rubricgym's own warm start (the same rows, steps and adapter shape as learning.py's), then TRL's GRPO
        from rubricgym.agents.train import TrainConfig, Trainer

        ours = Trainer(TrainConfig(env="Math-v0", env_kwargs=env_kwargs, steps=1, seed=args.seed, eval_tasks=0,
                                   checkpoint_every=0, output_dir=f"/tmp/rubricgym-{name}-warm",
                                   warm_start="scripted:calculator", warm_start_steps=args.warm_start_steps,
                                   policy=PolicyConfig(cpu_threads="fixed")))
        model, tokenizer = ours.policy.model, ours.policy.tokenizer
    else:
        model, tokenizer = load_model_and_tokenizer(None)
    rollout = EnvRollout("Math-v0", **env_kwargs)
    held_out_env = {**env_kwargs, "split": "test"}

    def point(lm, step: int, minutes: float) -> dict:
        """Held-out greedy accuracy; with tools also sampled pass@1 and the tool-call rates."""
        policy = Policy.wrap(lm, tokenizer, PolicyConfig(lora_r=0, max_new_tokens=48, cpu_threads="fixed"))
        return learning_point(policy, held_out_env, args.eval_tasks, step, minutes, env_id="Math-v0",
                              sampled=bool(tools))

    if warm:
        first = point(model, -1, 0.0)  # a fresh LoRA adapter is zero: this is the base model
        print(f"held-out before = {first}", flush=True)
        ours.warm_start()
        warm_point = point(model, 0, 0.0)
        print(f"after the warm start ({args.warm_start_steps} SFT steps): {warm_point}", flush=True)
        curve = [first, {**warm_point, "warm_start": True}]
    else:
        first, warm_point = point(model, 0, 0.0), None
        print(f"held-out before = {first}", flush=True)
        curve = [first]
    acc_before = first["accuracy"]

    class Budget(TrainerCallback):
        """Stops at the time budget; measures held-out accuracy every ``eval_every`` steps off the clock."""

        def __init__(self):
            self.train_seconds, self.started = 0.0, None

        def on_step_begin(self, train_args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, train_args, state, control, model=None, **kwargs):
            self.train_seconds += time.perf_counter() - self.started
            if state.global_step % args.eval_every == 0:
                row = point(model, state.global_step, self.train_seconds / 60)
                curve.append(row)
                rewards = [entry.get("reward") for entry in state.log_history if "reward" in entry]
                print(f"step {state.global_step:3d}  {self.train_seconds / 60:5.1f} min  "
                      f"reward {rewards[-1] if rewards else float('nan'):+.2f}  held-out {row}", flush=True)
            if self.train_seconds >= args.minutes * 60:
                control.should_training_stop = True
            return control

    budget = Budget()
    config = GRPOConfig(
        output_dir=f"/tmp/rubricgym-{name}", per_device_train_batch_size=args.micro_batch_size,
        num_generations=8, gradient_accumulation_steps=32 // args.micro_batch_size, max_completion_length=48,
        temperature=1.0, beta=0.0, loss_type="dapo",
        epsilon=0.2, epsilon_high=0.28, learning_rate=2e-4, lr_scheduler_type="constant", warmup_ratio=0.0,
        max_grad_norm=1.0, max_steps=args.max_steps, logging_steps=1, report_to="none", use_cpu=True, bf16=False,
        save_strategy="no", seed=args.seed, scale_rewards="group", disable_tqdm=True)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward,
                          train_dataset=rollout.dataset(seed=args.seed), rollout_func=rollout, args=config,
                          callbacks=[budget], peft_config=None if warm else peft_config)
    trainer.train()
    trained = trainer.accelerator.unwrap_model(trainer.model)
    minutes, steps = budget.train_seconds / 60, trainer.state.global_step
    last = point(trained, steps, minutes)
    acc_after = last["accuracy"]
    curve.append(last)

    RESULTS.mkdir(parents=True, exist_ok=True)
    figure, axis = plt.subplots(figsize=(6.5, 3.8))
    trained_curve = [row for row in curve if row["step"] >= 0 and not (warm and row is first)]
    axis.plot([p["minutes"] for p in trained_curve], [p["accuracy"] for p in trained_curve], marker="o",
              color="black", label="held-out accuracy (greedy)")
    if tools:
        axis.plot([p["minutes"] for p in trained_curve], [p["sampled_accuracy"] for p in trained_curve], "s--",
                  color="tab:red", label="held-out pass@1 (sampled)")
        axis.plot([p["minutes"] for p in trained_curve], [p["tool_call_rate"] for p in trained_curve], "^:",
                  color="tab:green", label="held-out tool-call rate (sampled)")
        axis.axhline(acc_before, color="grey", lw=0.8, ls="--", label=f"base model, greedy ({acc_before:.2f})")
        axis.legend(fontsize=8, loc="lower right")
    with_tools = f" with {', '.join(tools)}" + (f" (warm start {args.warm_start_steps} SFT steps at 0)" if warm else "")
    axis.set(xlabel="GRPO training minutes (CPU, evaluation excluded)", ylabel="held-out", ylim=(-0.02, 1.02))
    axis.set_title(f"TRL GRPOTrainer + EnvRollout, level {args.level}{with_tools}: {acc_before:.2f} -> {acc_after:.2f}",
                   fontsize=9)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=120)
    command = "python benchmarks/trl_learning.py " + " ".join(sys.argv[1:])
    (RESULTS / f"{name}.json").write_text(json.dumps({
        "command": command.strip(), "level": args.level, "tools": tools, "acc_before": acc_before,
        "acc_after": acc_after, "warm_start": warm_point, "warm_start_steps": args.warm_start_steps if warm else 0,
        "minutes": minutes, "steps": steps, "curve": curve, "trl_settings": {k: getattr(config, k) for k in (
            "per_device_train_batch_size", "num_generations", "max_completion_length", "temperature", "beta",
            "loss_type", "epsilon", "epsilon_high", "learning_rate", "lr_scheduler_type", "max_grad_norm")}}, indent=1))
    extra = tool_learning_fields(first, warm_point, last) if tools else ""
    print(f"RESULT acc_before={acc_before:.3f} acc_after={acc_after:.3f} minutes={minutes:.1f} steps={steps}"
          f" level={args.level}{extra}")


if __name__ == "__main__":
    main()
