"""Our GRPO against TRL's GRPOTrainer, side by side on the same model, LoRA, prompts and budget.

Both sides: the default SmolLM2-135M-Instruct (fp32, CPU), LoRA r 16 / alpha 32 on all linear
layers, one Math-v0 level-1 prompt per step with 8 completions of at most 64 tokens,
temperature 1.0, the same verified +1/-1 reward, one optimisation pass per batch. Each side
runs in its own subprocess (so peak resident memory is its own); the script runs them one
after the other, ``--rounds`` times alternating, and reports medians.

    python benchmarks/grpo_vs_trl.py [--steps 6] [--rounds 1]
    python benchmarks/grpo_vs_trl.py --multi-turn    # Math-v0 level 3 with the calculator, up to 3 turns

``--multi-turn``: each member may call the calculator and answer in up to 3 turns (at most 64
tokens each); TRL plays the episodes through rubricgym's ``EnvRollout`` (its ``rollout_func``,
the only way its GRPOTrainer runs an env's multi-turn loop here), reward ``env_reward``.

Each side keeps its own defaults otherwise: TRL's GRPOConfig checkpoints activations (recomputed
in backward: less memory, more time); ours reads a group's shared prompt once per micro-batch
(``--micro-batch-size``, 8 by default) and runs the LM head a chunk of positions at a time.

Ends with ``RESULT step_time_ratio=<ours/trl> peak_rss_ratio=<ours/trl> rollout_floor_ratio=<r>
variant=<single_turn|multi_turn>`` (#27's targets: <= 0.4 and <= 0.8); ``rollout_floor_ratio`` is our
sampling time alone over TRL's whole step, the ratio our step would reach if its update cost nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from rubricgym.app.flags import add_smoke_flag  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

COMPLETIONS, MAX_TOKENS, LORA_R, LORA_ALPHA, LR = 8, 64, 16, 32, 2e-4
MULTI_TURN = {"levels": (3,), "tools": ["calculator"], "max_turns": 3}


def prompts(n: int) -> list[list[dict]]:
    import gymnasium as gym

    import rubricgym  # noqa: F401

    env = gym.make("Math-v0", levels=(1,), disable_env_checker=True)
    rows = []
    for i in range(n):
        obs, info = env.reset(seed=i)
        rows.append((obs, env.unwrapped.reference()))
    return rows


def run_ours(steps: int, max_tokens: int = MAX_TOKENS, multi_turn: bool = False, micro_batch_size: int = 0) -> list[float]:
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer

    config = TrainConfig(env_kwargs=MULTI_TURN if multi_turn else {"levels": (1,)}, steps=steps, group_size=COMPLETIONS, groups_per_step=1, eval_tasks=0,
                         checkpoint_every=0, output_dir="/tmp/rubricgym-vs-trl",
                         policy=PolicyConfig(max_new_tokens=max_tokens, lora_r=LORA_R, lora_alpha=LORA_ALPHA, temperature=1.0, cpu_threads="fixed"))
    config.grpo.learning_rate = LR
    config.grpo.micro_batch_size = micro_batch_size or config.grpo.micro_batch_size
    trainer = Trainer(config)
    times, rollouts = [], []
    for _ in range(steps):
        start = time.perf_counter()
        stats = trainer.train_step()
        times.append(time.perf_counter() - start)
        rollouts.append(stats["rollout_seconds"])
    return times, rollouts


def run_trl(steps: int, max_tokens: int = MAX_TOKENS, multi_turn: bool = False) -> list[float]:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rubricgym.envs.math import answers_match, extract_answer
    from rubricgym.models import default_model_dir

    rollout = None
    if multi_turn:
        from rubricgym.integrations.trl import EnvRollout, env_reward

        rollout = EnvRollout("Math-v0", **MULTI_TURN)
        dataset = rollout.dataset(seed=0)
    else:
        dataset = Dataset.from_list([{"prompt": obs, "answer": answer} for obs, answer in prompts(steps)])

    def outcome(completions, answer, **_):
        out = []
        for completion, gold in zip(completions, answer):
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            found = extract_answer(text).answer
            out.append(1.0 if found is not None and answers_match(gold, found) else -1.0)
        return out

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.start)

    path = str(default_model_dir())
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(path)
    config = GRPOConfig(output_dir="/tmp/trl-grpo", per_device_train_batch_size=COMPLETIONS, num_generations=COMPLETIONS,
                        max_completion_length=max_tokens, learning_rate=LR, max_steps=steps, temperature=1.0,
                        logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, beta=0.0,
                        gradient_accumulation_steps=1, shuffle_dataset=False, seed=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward if multi_turn else outcome,
                          rollout_func=rollout, args=config, train_dataset=dataset,
                          peft_config=LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"), callbacks=[Timer()])
    trainer.train()
    return times, []


def child(impl: str, steps: int, max_tokens: int, multi_turn: bool, micro_batch_size: int) -> None:
    times, rollouts = run_ours(steps, max_tokens, multi_turn, micro_batch_size) if impl == "ours" else run_trl(steps, max_tokens, multi_turn)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("CHILD " + json.dumps({"impl": impl, "times": times, "rollout_times": rollouts, "peak_rss_mb": peak_mb}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=MAX_TOKENS, help="completion budget of each of the 8 completions")
    parser.add_argument("--multi-turn", action="store_true", help="Math-v0 level 3 with the calculator, up to 3 turns")
    parser.add_argument("--micro-batch-size", type=int, default=0, help="our GRPO's completions per pass; 0: its default")
    parser.add_argument("--child", choices=["ours", "trl"])
    add_smoke_flag(parser, steps=2, tokens=4)  # the first step is warm-up and not timed
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.tokens, args.multi_turn, args.micro_batch_size)
        return
    results: dict[str, list[dict]] = {"ours": [], "trl": []}
    for _ in range(args.rounds):
        for impl in ("trl", "ours"):
            out = subprocess.run([sys.executable, __file__, "--child", impl, "--steps", str(args.steps),
                                  "--tokens", str(args.tokens), "--micro-batch-size", str(args.micro_batch_size)]
                                 + ["--multi-turn"] * args.multi_turn,
                                 capture_output=True, text=True)
            line = next((l for l in out.stdout.splitlines() if l.startswith("CHILD ")), None)
            if line is None:
                print(out.stdout[-3000:], out.stderr[-3000:])
                raise SystemExit(f"{impl} run failed")
            results[impl].append(json.loads(line[6:]))
    summary = {}
    for impl, runs in results.items():
        steady = [t for run in runs for t in run["times"][1:]]  # the first step includes warm-up
        summary[impl] = {"step_s": statistics.median(steady), "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)}
        print(f"{impl:>4}: median step {summary[impl]['step_s']:.2f} s over {len(steady)} steps, "
              f"peak RSS {summary[impl]['peak_rss_mb']:.0f} MB")
    # our sampling alone against TRL's whole step: the ratio our step would have if its update cost nothing
    rollout_s = statistics.median(t for run in results["ours"] for t in run["rollout_times"][1:])
    print(f"ours: median rollout {rollout_s:.2f} s of its step ({rollout_s / summary['ours']['step_s']:.0%})")
    print(f"RESULT step_time_ratio={summary['ours']['step_s'] / summary['trl']['step_s']:.3f} "
          f"peak_rss_ratio={summary['ours']['peak_rss_mb'] / summary['trl']['peak_rss_mb']:.3f} "
          f"rollout_floor_ratio={rollout_s / summary['trl']['step_s']:.3f} "
          f"variant={'multi_turn' if args.multi_turn else 'single_turn'}")


if __name__ == "__main__":
    main()
