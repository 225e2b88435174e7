"""Tool-use learning beyond arithmetic: held-out success before RL, after a warm start, after GRPO.

Policy: the default SmolLM2-135M-Instruct with LoRA (r 16), fp32 on CPU, the family's reply
budget (``TrainingDefaults.max_new_tokens``: 128 for function calls). Env: any family with
held-out tasks, ``FunctionCall-v0`` on BFCL ``simple_python`` by default (320 train rows, the 80
rows of the test split never trained on; the reward is BFCL's AST check). With ``--warm-start``
the run begins with a short SFT on the family's scripted agent (``scripted:reference`` writes each
*train* row's labelled call), as ``rubricgym train --warm-start`` does; then GRPO for
``--minutes``. Held-out success is measured greedy on every held-out task, before, after the
warm start and after RL. Writes a JSON and a plot under benchmarks/results/.

    python benchmarks/learning_tools.py                                  # BFCL simple_python
    python benchmarks/learning_tools.py --warm-start-steps 0             # RL alone
    python benchmarks/learning_tools.py --env ToolUse-v0 --env-kwargs '{}' --warm-start ''

Ends with ``RESULT env=<id> acc_before=<a> acc_warm=<w> acc_after=<b> gain=<b-a> steps=<n>
minutes=<m> tool_call_rate=<c> valid_call_rate=<v>`` (held-out, greedy; rates after RL).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

RESULTS = results_dir(__file__)


def plot(curve: list[dict], path, title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [row["label"] for row in curve]
    ax.plot(range(len(curve)), [row["accuracy"] for row in curve], "o-", label="held-out success (greedy)")
    if all("tool_call_rate" in row for row in curve):
        ax.plot(range(len(curve)), [row["tool_call_rate"] for row in curve], "s--", label="tool-call rate")
    ax.set_xticks(range(len(curve)), labels, rotation=20)
    ax.set_ylim(0, 1.05)
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="FunctionCall-v0")
    parser.add_argument("--env-kwargs", type=json.loads, default={"dataset": "simple_python"})
    parser.add_argument("--warm-start", default="scripted:reference", help="a JSONL of SFT rows, scripted:<agent>, or '' for none")
    parser.add_argument("--warm-start-steps", type=int, default=8)
    parser.add_argument("--minutes", type=float, default=12.0, help="GRPO time budget (evaluation excluded)")
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=1000, help="evaluate every this many GRPO steps (besides the ends)")
    parser.add_argument("--eval-tasks", type=int, default=80, help="held-out tasks (BFCL simple_python has 80)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--groups", type=int, default=2, help="groups per GRPO step")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="reply budget; 0: the family's")
    parser.add_argument("--seed", type=int, default=0)
    add_smoke_flag(parser, argv, minutes=0.01, max_steps=1, eval_tasks=2, warm_start_steps=1, group_size=2, groups=1,
                   max_new_tokens=12)
    args = parser.parse_args(argv)

    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig, Trainer
    from rubricgym.registration import env_class, held_out

    defaults = env_class(args.env).training
    warm = bool(args.warm_start) and args.warm_start_steps > 0
    name = f"learning_tools_{args.env.split('-')[0]}"
    config = TrainConfig(env=args.env, env_kwargs=args.env_kwargs, steps=args.max_steps, seed=args.seed,
                         group_size=args.group_size, groups_per_step=args.groups,
                         output_dir=f"/tmp/rubricgym-{name}", eval_tasks=0, checkpoint_every=0, record_groups=0,
                         warm_start=args.warm_start if warm else "", warm_start_steps=args.warm_start_steps,
                         policy=PolicyConfig(max_new_tokens=args.max_new_tokens or defaults.max_new_tokens, cpu_threads="fixed"))
    trainer = Trainer(config)
    eval_id, eval_kwargs = held_out(args.env, args.env_kwargs)

    def point(label: str, minutes: float) -> dict:
        result = evaluate(trainer.policy, eval_kwargs, tasks=args.eval_tasks, seed=777, env_id=eval_id, progress=True)
        row = {"label": label, "step": trainer.step, "minutes": minutes, "accuracy": result["accuracy"],
               **{key: result[key] for key in ("tool_call_rate", "valid_call_rate", "tool_calls_per_episode") if key in result}}
        trainer.log({"step": trainer.step, **{f"eval_{k}": v for k, v in row.items() if k not in ("label", "step", "minutes")}})
        print(f"{label}: {row}", flush=True)
        return row

    curve = [point("before", 0.0)]
    if warm:
        trainer.log({"step": 0, **trainer.warm_start()})
        curve.append(point(f"warm start ({args.warm_start_steps} SFT steps)", 0.0))
    train_seconds = 0.0
    while trainer.step < args.max_steps and train_seconds < args.minutes * 60:
        started = time.perf_counter()
        stats = trainer.train_step()
        train_seconds += time.perf_counter() - started
        trainer.log(stats)
        print(f"step {trainer.step:3d}  {train_seconds / 60:5.1f} min  reward {stats['reward']:+.2f}  "
              f"tool calls {stats.get('tool_call_rate', 0.0):.2f}", flush=True)
        if trainer.step % args.eval_every == 0:
            curve.append(point(f"step {trainer.step}", train_seconds / 60))
    if curve[-1]["step"] != trainer.step or len(curve) == 1 + warm:
        curve.append(point(f"after {trainer.step} GRPO steps", train_seconds / 60))
    before, after = curve[0], curve[-1]
    warm_acc = curve[1]["accuracy"] if warm else before["accuracy"]
    result = {"env": args.env, "env_kwargs": args.env_kwargs, "acc_before": before["accuracy"], "acc_warm": warm_acc,
              "acc_after": after["accuracy"], "gain": after["accuracy"] - before["accuracy"], "steps": trainer.step,
              "minutes": train_seconds / 60, "warm_start": args.warm_start if warm else "",
              "warm_start_steps": args.warm_start_steps if warm else 0, "curve": curve,
              "command": "python " + " ".join(["benchmarks/learning_tools.py"] + sys.argv[1:]),
              "eval": f"{args.eval_tasks} held-out tasks ({eval_id} {eval_kwargs}), greedy",
              "config": {"group_size": config.group_size, "groups_per_step": config.groups_per_step,
                         "max_new_tokens": config.policy.max_new_tokens, "grpo": trainer.config.grpo.__dict__}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
    title = (f"{args.env} {json.dumps(args.env_kwargs)}: SmolLM2-135M + LoRA, CPU; held-out "
             f"{before['accuracy']:.2f} -> {after['accuracy']:.2f}")
    print("plot:", plot(curve, RESULTS / f"{name}.png", title))
    print(f"RESULT env={args.env} acc_before={before['accuracy']:.3f} acc_warm={warm_acc:.3f} "
          f"acc_after={after['accuracy']:.3f} gain={result['gain']:+.3f} steps={trainer.step} "
          f"minutes={train_seconds / 60:.1f} tool_call_rate={after.get('tool_call_rate', 0.0):.3f} "
          f"valid_call_rate={after.get('valid_call_rate', 0.0):.3f}")
    trainer.envs.close()
    return result


if __name__ == "__main__":
    main()
