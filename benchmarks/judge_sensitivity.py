"""How good must a judge be? GRPO with RULER (replace) under simulated judges of known accuracy, against RLVR.

The agent (default model + LoRA, CPU, the project's GRPO defaults) trains on the built-in
arithmetic (``Math-v0``, one level) from the same weights with the same seeds and budget, rewarded
either by the verified outcome (RLVR, ``Math-v0``) or by the RULER score alone from a simulated
judge ``oracle:<a>`` (``MathRuler-v0``, ``combine="replace"``), whose pairwise accuracy on
(correct, wrong) pairs is ``a``. Held-out accuracy after training (greedy, the generator's test
split, the same tasks for every run) is reported per point with a paired 95 % bootstrap interval
over seeds x held-out tasks (rubricgym.app.stats), with the gain over the untrained weights and the
difference from RLVR, as a table and a PNG; the real judges' LLMBar accuracies
(benchmarks/results/judge_llmbar.json, when present) are marked on the curve. ``--floors``
adds runs with GRPO's ``min_group_std`` set (``0.7:0.25``: oracle 0.7, std floored at 0.25), to
decide that knob's default.

    python benchmarks/judge_sensitivity.py --quick        # rlvr, 1.0, 0.7, 0.5; 1 seed; 8 steps
    python benchmarks/judge_sensitivity.py                # rlvr, 0.5 to 1.0 in steps of 0.1; 2 seeds; 8 steps
    python benchmarks/judge_sensitivity.py --floors 0.7:0.25   # + oracle 0.7 with min_group_std 0.25
    python benchmarks/judge_sensitivity.py --seeds 3       # more seeds: narrower intervals

Ends with ``RESULT rlvr=<acc> oracle_1.0=<acc> oracle_0.7=<acc> oracle_0.5=<acc> ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402
from rubricgym.app.stats import paired_bootstrap  # noqa: E402

RESULTS = results_dir(__file__)


def parse_reward(reward: str) -> tuple[str, float]:
    """``rlvr``, ``oracle:<a>`` or ``oracle:<a>|min_group_std=<f>`` -> (reward, std floor)."""
    judge, _, floor = reward.partition("|min_group_std=")
    return judge, float(floor or 0.0)


DONE = Path("/tmp/rubricgym-sensitivity/done")
"""Finished runs (one JSON each): an interrupted sweep picks up where it stopped."""


def run_name(reward: str) -> str:
    """A file name for a reward (the judge grammar's ``:``, ``,``, ``=`` and ``|`` made safe).

    Example:
        >>> run_name("oracle:fp=0.3,fn=0.05"), run_name("oracle:0.7|min_group_std=0.25")
        ('oracle_fp_0.3_fn_0.05', 'oracle_0.7_min_group_std_0.25')
    """
    return re.sub(r"[^A-Za-z0-9.]+", "_", reward)


def train_and_evaluate(reward: str, seed: int, steps: int, level: int, eval_tasks: int, correction: str = "") -> list[bool]:
    """Per held-out task: solved after ``steps`` GRPO steps under ``reward`` (see :func:`parse_reward`;
    ``steps=0``: the untrained weights), the judge corrected by the profile file ``correction`` if given."""
    from rubricgym.app.provenance import provenance, same_provenance

    tag = f"-corrected-{run_name(Path(correction).stem)}" if correction else ""
    # a finished run is reused only when the code, every argument (the profile's content included) and
    # the packages are the same: runs made by older code were silently mixed in before
    profile = Path(correction).read_text() if correction else ""
    where = provenance({"reward": reward, "seed": seed, "steps": steps, "level": level, "eval_tasks": eval_tasks,
                        "correction": profile, "cpu_threads": "fixed"})
    done = DONE / f"{run_name(reward)}{tag}-seed{seed}-steps{steps}-level{level}-tasks{eval_tasks}-{where['config_hash']}.json"
    if done.is_file():
        stored = json.loads(done.read_text())
        if isinstance(stored, dict) and same_provenance(stored.get("provenance"), where):
            print(f"reused {done.name} (computed at {where['commit'][:12]})", flush=True)
            return stored["solved"]
    solved = _train_and_evaluate(reward, seed, steps, level, eval_tasks, correction, tag)
    DONE.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps({"provenance": where, "solved": [bool(x) for x in solved]}))
    return solved


def _train_and_evaluate(reward: str, seed: int, steps: int, level: int, eval_tasks: int, correction: str = "",
                        tag: str = "") -> list[bool]:
    from rubricgym.agents.evaluation import make_envs
    from rubricgym.agents.grpo import GRPOConfig
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.rollout import collect_rollouts
    from rubricgym.agents.train import TrainConfig, Trainer

    judge, floor = parse_reward(reward)
    env, env_kwargs = ("Math-v0", {"levels": (level,)}) if judge == "rlvr" else \
        ("MathRuler-v0", {"levels": (level,), "judge": judge, "combine": "replace"})
    config = TrainConfig(env=env, env_kwargs=env_kwargs, steps=steps, seed=seed, eval_tasks=0, checkpoint_every=0,
                         record_groups=0, report_to=(), show_completions=0, grpo=GRPOConfig(min_group_std=floor),
                         judge_correction=correction, output_dir=f"/tmp/rubricgym-sensitivity/{run_name(reward)}{tag}-{seed}",
                         policy=PolicyConfig(cpu_threads="fixed"))
    trainer = Trainer(config)
    while trainer.step < steps:
        trainer.train_step()
    # the same held-out tasks (fixed sampling seeds) for every run: results pair up task by task
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
    parser.add_argument("--floors", default="",
                        help="extra runs with GRPO's min_group_std: <accuracy>:<floor>,... (empty: none)")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--eval-tasks", type=int, default=64)
    add_smoke_flag(parser, accuracies="1.0", seeds=1, steps=1, eval_tasks=4)
    args = parser.parse_args()
    if args.quick:
        args.accuracies, args.floors, args.seeds, args.steps, args.eval_tasks = "1.0,0.7,0.5", "", 1, 8, 48
    rewards = ["rlvr"] + [f"oracle:{float(a):g}" for a in args.accuracies.split(",")]
    rewards += [f"oracle:{float(a):g}|min_group_std={float(f):g}" for a, f in
                (item.split(":") for item in args.floors.split(",") if item)]
    started = time.perf_counter()
    before = train_and_evaluate("rlvr", 0, 0, args.level, args.eval_tasks)
    print(f"untrained    held-out {np.mean(before):.3f}", flush=True)
    runs = {}
    for reward in rewards:
        runs[reward] = [train_and_evaluate(reward, seed, args.steps, args.level, args.eval_tasks)
                        for seed in range(args.seeds)]
        print(f"{reward:<12} held-out {np.mean(runs[reward]):.3f}  per seed {[float(np.mean(r)) for r in runs[reward]]}"
              f"  ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
    minutes = (time.perf_counter() - started) / 60
    table = paired_bootstrap(runs, reference="rlvr", before=before)
    rows = {reward: {"accuracy": table[reward].mean.mean, "ci": [table[reward].mean.low, table[reward].mean.high],
                     "per_seed": [float(np.mean(r)) for r in runs[reward]], **table[reward].as_dict(),
                     "solved": [[int(x) for x in r] for r in runs[reward]]} for reward in rewards}

    name = "judge_sensitivity_quick" if args.quick else "judge_sensitivity"
    RESULTS.mkdir(parents=True, exist_ok=True)
    import shlex

    command = "python benchmarks/judge_sensitivity.py " + shlex.join(sys.argv[1:])
    from rubricgym.app.provenance import provenance

    (RESULTS / f"{name}.json").write_text(json.dumps({"command": command.strip(), "provenance": provenance(vars(args)),
                                                      "steps": args.steps, "seeds": args.seeds,
                                                      "level": args.level, "eval_tasks": args.eval_tasks, "minutes": minutes,
                                                      "before": float(np.mean(before)), "before_solved": before,
                                                      "rows": rows}))
    lines = [f"# Held-out accuracy vs simulated judge accuracy (`{command.strip()}`)", "",
             f"GRPO, default model + LoRA, CPU, level {args.level}, {args.steps} steps, {args.seeds} seed(s), "
             f"{args.eval_tasks} held-out tasks (the same for every run); paired 95 % bootstrap over seeds x tasks; "
             f"untrained weights {np.mean(before):.3f}; * = the interval excludes 0; {minutes:.1f} min for the runs "
             "this invocation trained (finished runs are reused from /tmp/rubricgym-sensitivity when made by the same code, "
             "arguments and packages).", "",
             "| reward | held-out after [95 % CI] | gain over untrained | difference from RLVR | per seed |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r.replace('|', ', ')} | {table[r].mean} | {table[r].gain.signed()} | "  # '|' would split the cell
              f"{table[r].difference.signed() if table[r].difference else ''} | "
              f"{', '.join(f'{x:.3f}' for x in v['per_seed'])} |" for r, v in rows.items()]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")

    oracles = [(float(r.split(":")[1]), v) for r, v in rows.items() if r.startswith("oracle:") and "|" not in r]
    figure, axis = plt.subplots(figsize=(6, 3.8))
    xs = [a for a, _ in oracles]
    axis.errorbar(xs, [v["accuracy"] for _, v in oracles],
                  yerr=[[v["accuracy"] - v["ci"][0] for _, v in oracles], [v["ci"][1] - v["accuracy"] for _, v in oracles]],
                  marker="o", capsize=3, label="RULER (replace), simulated judge")
    rlvr = rows["rlvr"]
    axis.axhspan(rlvr["ci"][0], rlvr["ci"][1], color="green", alpha=0.15, label=f"RLVR {rlvr['accuracy']:.2f}")
    axis.axhline(float(np.mean(before)), color="black", lw=0.8, ls="--", label=f"untrained {np.mean(before):.2f}")
    for reward, v in rows.items():
        if "|" in reward:
            accuracy, floor = float(reward.split(":")[1].split("|")[0]), parse_reward(reward)[1]
            axis.errorbar([accuracy + 0.01], [v["accuracy"]], yerr=[[v["accuracy"] - v["ci"][0]], [v["ci"][1] - v["accuracy"]]],
                          marker="s", color="purple", capsize=3, label=f"min_group_std={floor:g}")
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
    print("RESULT " + " ".join(f"{result_key(r)}={v['accuracy']:.3f}" for r, v in rows.items()) + f" minutes={minutes:.1f}")


def result_key(reward: str) -> str:
    """``oracle:1|min_group_std=0.25`` -> ``oracle_1.0_floor0.25`` (accuracies with one decimal at least).

    Example:
        >>> result_key("oracle:1"), result_key("rlvr"), result_key("oracle:0.7|min_group_std=0.25")
        ('oracle_1.0', 'rlvr', 'oracle_0.7_floor0.25')
    """
    judge, floor = parse_reward(reward)
    if judge == "rlvr":
        return judge
    accuracy = float(judge.split(":")[1])
    key = f"oracle_{accuracy:.1f}" if round(accuracy, 1) == accuracy else f"oracle_{accuracy:g}"
    return key + (f"_floor{floor:g}" if floor else "")


if __name__ == "__main__":
    main()
