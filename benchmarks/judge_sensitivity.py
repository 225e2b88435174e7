"""How good must a judge be? GRPO with RULER (replace) under simulated judges of known accuracy, against RLVR.

The agent (default model + LoRA, CPU, the project's GRPO defaults) trains on the built-in
arithmetic (``Math-v0``, one level) from the same weights with the same seeds and budget, rewarded
either by the verified outcome (RLVR, ``Math-v0``) or by the RULER score alone from a simulated
judge ``oracle:<a>`` (``MathRuler-v0``, ``combine="replace"``), whose pairwise accuracy on
(correct, wrong) pairs is ``a``. Held-out accuracy after training (greedy, the generator's test
split) is reported per point with a 95 % bootstrap interval over seeds x held-out tasks, as a
table and a PNG; the real judges' LLMBar accuracies (benchmarks/results/judge_llmbar.json, when
present) are marked on the curve.

    python benchmarks/judge_sensitivity.py --quick        # rlvr, 1.0, 0.7, 0.5; 1 seed; 8 steps
    python benchmarks/judge_sensitivity.py                # rlvr, 0.5 ... 1.0; 3 seeds; 20 steps

Ends with ``RESULT rlvr=<acc> oracle_1.0=<acc> oracle_0.7=<acc> oracle_0.5=<acc> ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

RESULTS = Path(__file__).resolve().parent / "results"


def bootstrap(values: list[list[bool]], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % interval of the mean accuracy, resampling seeds, then held-out tasks within each seed."""
    import numpy as np

    rng = np.random.default_rng(seed)
    runs = [np.asarray(v, dtype=float) for v in values]
    means = []
    for _ in range(resamples):
        picked = [runs[k] for k in rng.integers(0, len(runs), len(runs))]
        means.append(np.mean([run[rng.integers(0, len(run), len(run))].mean() for run in picked]))
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def train_and_evaluate(reward: str, seed: int, steps: int, level: int, eval_tasks: int) -> list[bool]:
    """Per held-out task: solved after ``steps`` GRPO steps under ``reward`` (``rlvr`` or ``oracle:<a>``)."""
    from rubricgym.agents.evaluation import make_envs
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.rollout import collect_rollouts
    from rubricgym.agents.train import TrainConfig, Trainer

    env, env_kwargs = ("Math-v0", {"levels": (level,)}) if reward == "rlvr" else \
        ("MathRuler-v0", {"levels": (level,), "judge": reward, "combine": "replace"})
    config = TrainConfig(env=env, env_kwargs=env_kwargs, steps=steps, seed=seed, eval_tasks=0, checkpoint_every=0,
                         record_groups=0, report_to=(), show_completions=0,
                         output_dir=f"/tmp/rubricgym-sensitivity/{reward.replace(':', '_')}-{seed}",
                         policy=PolicyConfig(cpu_threads="fixed"))
    trainer = Trainer(config)
    while trainer.step < steps:
        trainer.train_step()
    envs = make_envs("Math-v0", num_envs=16, group_size=1, kwargs={"levels": (level,), "split": "test"})
    solved: list[bool] = []
    while len(solved) < eval_tasks:
        batch = collect_rollouts(envs, trainer.policy, seed=777 + len(solved), greedy=True)
        solved += batch.episode_correct
    envs.close()
    return solved[:eval_tasks]


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="rlvr, 1.0, 0.7, 0.5; 1 seed; 8 steps; 48 held-out tasks")
    parser.add_argument("--accuracies", default="0.5,0.6,0.7,0.8,0.9,1.0")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--eval-tasks", type=int, default=96)
    args = parser.parse_args()
    if args.quick:
        args.accuracies, args.seeds, args.steps, args.eval_tasks = "1.0,0.7,0.5", 1, 8, 48
    rewards = ["rlvr"] + [f"oracle:{float(a):g}" for a in args.accuracies.split(",")]
    started = time.perf_counter()
    rows = {}
    for reward in rewards:
        runs = [train_and_evaluate(reward, seed, args.steps, args.level, args.eval_tasks) for seed in range(args.seeds)]
        low, high = bootstrap(runs)
        rows[reward] = {"accuracy": float(np.mean([np.mean(r) for r in runs])), "ci": [low, high],
                        "per_seed": [float(np.mean(r)) for r in runs]}
        print(f"{reward:<12} held-out {rows[reward]['accuracy']:.3f} [{low:.2f}, {high:.2f}]  per seed "
              f"{rows[reward]['per_seed']}  ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
    minutes = (time.perf_counter() - started) / 60

    name = "judge_sensitivity_quick" if args.quick else "judge_sensitivity"
    RESULTS.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/judge_sensitivity.py " + " ".join(sys.argv[1:])
    (RESULTS / f"{name}.json").write_text(json.dumps({"command": command.strip(), "steps": args.steps, "seeds": args.seeds,
                                                      "level": args.level, "eval_tasks": args.eval_tasks, "minutes": minutes,
                                                      "rows": rows}, indent=1))
    lines = [f"# Held-out accuracy vs simulated judge accuracy (`{command.strip()}`)", "",
             f"GRPO, default model + LoRA, CPU, level {args.level}, {args.steps} steps, {args.seeds} seed(s), "
             f"{args.eval_tasks} held-out tasks; 95 % bootstrap over seeds x tasks; {minutes:.1f} min.", "",
             "| reward | held-out after [95 % CI] | per seed |", "| --- | --- | --- |"]
    lines += [f"| {r} | {v['accuracy']:.3f} [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}] | {v['per_seed']} |" for r, v in rows.items()]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")

    oracles = [(float(r.split(":")[1]), v) for r, v in rows.items() if r.startswith("oracle:")]
    figure, axis = plt.subplots(figsize=(6, 3.8))
    xs = [a for a, _ in oracles]
    axis.errorbar(xs, [v["accuracy"] for _, v in oracles],
                  yerr=[[v["accuracy"] - v["ci"][0] for _, v in oracles], [v["ci"][1] - v["accuracy"] for _, v in oracles]],
                  marker="o", capsize=3, label="RULER (replace), simulated judge")
    rlvr = rows["rlvr"]
    axis.axhspan(rlvr["ci"][0], rlvr["ci"][1], color="green", alpha=0.15, label=f"RLVR {rlvr['accuracy']:.2f}")
    llmbar = RESULTS / "judge_llmbar.json"
    if llmbar.exists():
        for key, row in json.loads(llmbar.read_text()).items():
            if key.endswith("|natural") and not key.startswith(("oracle", "random")):
                axis.axvline(row["accuracy"], color="gray", lw=0.8, ls=":")
                axis.text(row["accuracy"], 0.02, f" {row['judge']} (LLMBar)", rotation=90, fontsize=6, color="gray")
    axis.set(xlabel="judge pairwise accuracy", ylabel="held-out accuracy after training", ylim=(0, 1.02), xlim=(0, 1.02),
             title=f"How good must the judge be? (level {args.level}, {args.steps} steps)")
    axis.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=120)
    print("RESULT " + " ".join(f"{r.replace(':', '_')}={v['accuracy']:.3f}" for r, v in rows.items()) + f" minutes={minutes:.1f}")


if __name__ == "__main__":
    main()
