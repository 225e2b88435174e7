"""Does GRPO with the project's defaults learn on a CPU? Held-out accuracy before and after.

Policy: the default SmolLM2-135M-Instruct with LoRA (r 16, all linear layers), fp32 on CPU.
Env: ``Math-v0`` on the built-in generator, one level; held-out tasks are the generator's
``test`` split; greedy decoding; the answer is the last ``\\boxed{}``, else the reply's last
number (``answer_fallback="last_number"``). Training stops at the time budget or step limit;
held-out accuracy is measured every ``--eval-every`` steps (evaluation time is excluded from
the training minutes). Writes a curve PNG and a JSON of the run under benchmarks/results/.

    python benchmarks/learning.py --level 1 --minutes 20      # single-digit addition
    python benchmarks/learning.py --level 3 --minutes 30      # two-digit addition and subtraction

Ends with ``RESULT acc_before=<a> acc_after=<b> minutes=<m> minutes_to_90=<t> level=<l> seed=<s>``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rubricgym.agents.evaluation import evaluate  # noqa: E402
from rubricgym.agents.policy import PolicyConfig  # noqa: E402
from rubricgym.agents.train import TrainConfig, Trainer  # noqa: E402
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

RESULTS = results_dir(__file__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=20.0, help="training time budget (evaluation excluded)")
    parser.add_argument("--max-steps", type=int, default=400)
    parser.add_argument("--eval-every", type=int, default=8)
    parser.add_argument("--eval-tasks", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    add_smoke_flag(parser, minutes=0.05, max_steps=1, eval_every=1, eval_tasks=4)
    args = parser.parse_args()

    config = TrainConfig(env="Math-v0", env_kwargs={"levels": (args.level,)}, steps=args.max_steps, seed=args.seed,
                         output_dir=f"/tmp/rubricgym-learning-L{args.level}", eval_tasks=0, checkpoint_every=0,
                         policy=PolicyConfig(cpu_threads="fixed"))  # fixed threads: reruns are bit-identical
    trainer = Trainer(config)
    eval_kwargs = {"levels": (args.level,), "split": "test"}

    def held_out() -> float:
        return evaluate(trainer.policy, eval_kwargs, tasks=args.eval_tasks, seed=777, env_id="Math-v0")["accuracy"]

    acc_before = held_out()
    curve = [{"step": 0, "minutes": 0.0, "accuracy": acc_before}]
    trainer.log({"step": 0, "eval_accuracy": acc_before})
    print(f"level {args.level}: held-out accuracy before = {acc_before:.3f}", flush=True)
    train_seconds, minutes_to_90 = 0.0, None
    while trainer.step < args.max_steps and train_seconds < args.minutes * 60:
        start = time.perf_counter()
        stats = trainer.train_step()
        train_seconds += time.perf_counter() - start
        trainer.log(stats)
        if trainer.step % args.eval_every == 0:
            accuracy = held_out()
            curve.append({"step": trainer.step, "minutes": train_seconds / 60, "accuracy": accuracy})
            trainer.log({"step": trainer.step, "eval_accuracy": accuracy})
            print(f"step {trainer.step:3d}  {train_seconds / 60:5.1f} min  reward {stats['reward']:+.2f}  "
                  f"tokens {stats['mean_completion_tokens']:.0f}  held-out {accuracy:.3f}", flush=True)
            if minutes_to_90 is None and accuracy >= 0.9:
                minutes_to_90 = train_seconds / 60
    acc_after = held_out()
    curve.append({"step": trainer.step, "minutes": train_seconds / 60, "accuracy": acc_after})
    trainer.log({"step": trainer.step, "eval_accuracy": acc_after})
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot = trainer.plot(RESULTS / f"learning_L{args.level}.png",
                        title=f"GRPO, SmolLM2-135M + LoRA on CPU, level {args.level}: held-out {acc_before:.2f} -> {acc_after:.2f}")
    command = "python " + " ".join([sys.argv[0].split("/")[-2] + "/" + sys.argv[0].split("/")[-1]] + sys.argv[1:])
    (RESULTS / f"learning_L{args.level}.json").write_text(json.dumps({
        "command": command, "level": args.level, "seed": args.seed, "acc_before": acc_before, "acc_after": acc_after,
        "train_minutes": train_seconds / 60, "steps": trainer.step, "minutes_to_90": minutes_to_90, "curve": curve,
        "extraction": "last \\boxed{}, else last number", "eval": f"{args.eval_tasks} held-out test-split tasks, greedy",
        "config": {"grpo": trainer.config.grpo.__dict__, "policy": trainer.config.policy.__dict__,
                   "group_size": config.group_size, "groups_per_step": config.groups_per_step}}, indent=2, default=str))
    t90 = "none" if minutes_to_90 is None else f"{minutes_to_90:.1f}"
    print(f"plot: {plot}")
    print(f"RESULT acc_before={acc_before:.3f} acc_after={acc_after:.3f} minutes={train_seconds / 60:.1f} "
          f"minutes_to_90={t90} level={args.level} seed={args.seed}")


if __name__ == "__main__":
    main()
