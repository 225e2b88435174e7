"""Does TRL's GRPOTrainer learn through rubricgym's rollout function on a CPU? Held-out accuracy before and after.

TRL 1.16 ``GRPOTrainer`` with ``rollout_func=EnvRollout("Math-v0", levels=(1,))`` (single-digit
sums from the built-in generator) and ``reward_funcs=env_reward``; the default SmolLM2-135M-
Instruct with LoRA (r 16, alpha 32, all linear layers), fp32 on CPU. The TRL settings mirror
the project's own trainer (benchmarks/learning.py): 4 groups of 8 per step, lr 2e-4 constant,
48 new tokens, temperature 1.0, no KL (beta 0), token-level loss ("dapo"), epsilon 0.2 / 0.28,
grad clip 1.0. Held-out accuracy: greedy, the generator's ``test`` split, 96 tasks, through the
env loop (rubricgym's evaluator on the trained model). Training stops at the time budget
(evaluation time excluded). Writes a curve PNG and a JSON under benchmarks/results/.

    python benchmarks/trl_learning.py --minutes 20

Ends with ``RESULT acc_before=<a> acc_after=<b> minutes=<m> steps=<n>``.
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

    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.integrations.trl import EnvRollout, env_reward
    from rubricgym.models import load_model_and_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="training time budget (evaluation excluded)")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-tasks", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    add_smoke_flag(parser, minutes=0.05, max_steps=1, eval_every=1, eval_tasks=4)
    args = parser.parse_args()

    model, tokenizer = load_model_and_tokenizer(None)
    rollout = EnvRollout("Math-v0", levels=(1,))
    held_out_env = {"levels": (1,), "split": "test"}

    def held_out(lm) -> float:
        policy = Policy.wrap(lm, tokenizer, PolicyConfig(lora_r=0, max_new_tokens=48, cpu_threads="fixed"))
        return evaluate(policy, held_out_env, tasks=args.eval_tasks, seed=777, env_id="Math-v0")["accuracy"]

    acc_before = held_out(model)
    print(f"held-out accuracy before = {acc_before:.3f}", flush=True)
    curve = [{"step": 0, "minutes": 0.0, "accuracy": acc_before}]

    class Budget(TrainerCallback):
        """Stops at the time budget; measures held-out accuracy every ``eval_every`` steps off the clock."""

        def __init__(self):
            self.train_seconds, self.started = 0.0, None

        def on_step_begin(self, train_args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, train_args, state, control, model=None, **kwargs):
            self.train_seconds += time.perf_counter() - self.started
            if state.global_step % args.eval_every == 0:
                accuracy = held_out(model)
                curve.append({"step": state.global_step, "minutes": self.train_seconds / 60, "accuracy": accuracy})
                rewards = [row.get("reward") for row in state.log_history if "reward" in row]
                print(f"step {state.global_step:3d}  {self.train_seconds / 60:5.1f} min  "
                      f"reward {rewards[-1] if rewards else float('nan'):+.2f}  held-out {accuracy:.3f}", flush=True)
            if self.train_seconds >= args.minutes * 60:
                control.should_training_stop = True
            return control

    budget = Budget()
    config = GRPOConfig(
        output_dir="/tmp/rubricgym-trl-learning", per_device_train_batch_size=32, num_generations=8,
        gradient_accumulation_steps=1, max_completion_length=48, temperature=1.0, beta=0.0, loss_type="dapo",
        epsilon=0.2, epsilon_high=0.28, learning_rate=2e-4, lr_scheduler_type="constant", warmup_ratio=0.0,
        max_grad_norm=1.0, max_steps=args.max_steps, logging_steps=1, report_to="none", use_cpu=True, bf16=False,
        save_strategy="no", seed=args.seed, scale_rewards="group", disable_tqdm=True)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward,
                          train_dataset=rollout.dataset(seed=args.seed), rollout_func=rollout, args=config,
                          callbacks=[budget],
                          peft_config=LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"))
    trainer.train()
    trained = trainer.accelerator.unwrap_model(trainer.model)
    acc_after = held_out(trained)
    minutes, steps = budget.train_seconds / 60, trainer.state.global_step
    curve.append({"step": steps, "minutes": minutes, "accuracy": acc_after})

    RESULTS.mkdir(parents=True, exist_ok=True)
    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.plot([p["minutes"] for p in curve], [p["accuracy"] for p in curve], marker="o")
    axis.set(xlabel="training minutes (CPU, evaluation excluded)", ylabel="held-out accuracy", ylim=(0, 1.02),
             title=f"TRL GRPOTrainer + rubricgym EnvRollout, level 1: {acc_before:.2f} -> {acc_after:.2f}")
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(RESULTS / "trl_learning.png", dpi=120)
    command = "python benchmarks/trl_learning.py " + " ".join(sys.argv[1:])
    (RESULTS / "trl_learning.json").write_text(json.dumps({
        "command": command.strip(), "acc_before": acc_before, "acc_after": acc_after, "minutes": minutes,
        "steps": steps, "curve": curve, "trl_settings": {k: getattr(config, k) for k in (
            "per_device_train_batch_size", "num_generations", "max_completion_length", "temperature", "beta",
            "loss_type", "epsilon", "epsilon_high", "learning_rate", "lr_scheduler_type", "max_grad_norm")}}, indent=1))
    print(f"RESULT acc_before={acc_before:.3f} acc_after={acc_after:.3f} minutes={minutes:.1f} steps={steps}")


if __name__ == "__main__":
    main()
