"""Does GRPO with the project's defaults learn on a CPU? Held-out accuracy before and after.

Policy: the default SmolLM2-135M-Instruct with LoRA (r 16, all linear layers), fp32 on CPU.
Env: ``Math-v0`` on the built-in generator, one level; held-out tasks are the generator's
``test`` split; greedy decoding; the answer is the last ``\\boxed{}``, else the reply's last
number (``answer_fallback="last_number"``). Training stops at the time budget or step limit;
held-out accuracy is measured every ``--eval-every`` steps (evaluation time is excluded from
the training minutes). Writes a curve PNG and a JSON of the run under benchmarks/results/.

With ``--tools calculator`` the env offers the calculator (multi-turn: call, result, answer) and
the run starts with a short supervised warm start on the scripted calculator agent's solved
train-split episodes (``--warm-start-steps`` SFT steps, ``TrainConfig.warm_start``): the default
model never writes a tool call by itself (0 of 32 held-out episodes, greedy or sampled, even with
an example call in the system prompt), so RL alone would have nothing to reinforce. Held-out
accuracy is then measured greedy and sampled (pass@1 at the training temperature), with the
tool-call rate of each, before, after the warm start, and after RL.

    python benchmarks/learning.py --level 1 --minutes 20      # single-digit addition
    python benchmarks/learning.py --level 3 --minutes 30      # two-digit addition and subtraction
    python benchmarks/learning.py --level 3 --tools calculator --minutes 30

Ends with ``RESULT acc_before=<a> acc_after=<b> minutes=<m> minutes_to_90=<t> level=<l> seed=<s>``;
with tools also ``acc_warm=<w> sampled_before=.. sampled_warm=.. sampled_after=.. tool_call_rate=<c>``
(the sampled tool-call rate after RL) ``tool_call_rate_warm=..``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rubricgym.agents.evaluation import learning_point, tool_learning_fields  # noqa: E402
from rubricgym.agents.policy import PolicyConfig  # noqa: E402
from rubricgym.agents.train import TrainConfig, Trainer  # noqa: E402
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

RESULTS = results_dir(__file__)


def plot_tool_learning(curve: list[dict], history: list[dict], path, title: str):
    """Held-out greedy and sampled accuracy and the sampled tool-call rate at each evaluation (the
    base model at step -1, after the warm start at step 0), and the training rollouts' accuracy and
    tool-call rate per RL step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    train = [row for row in history if "reward" in row]
    ax.plot([row["step"] for row in train], [row["train_accuracy"] for row in train], color="tab:orange", alpha=0.6,
            label="training accuracy (sampled)")
    ax.plot([row["step"] for row in train], [row.get("tool_call_rate", 0.0) for row in train], color="tab:green",
            alpha=0.6, label="training tool-call rate")
    xs = [-1 if index == 0 else row["step"] for index, row in enumerate(curve)]
    ax.plot(xs, [row["accuracy"] for row in curve], "o-", color="black", label="held-out accuracy (greedy)")
    ax.plot(xs, [row.get("sampled_accuracy", float("nan")) for row in curve], "s--", color="tab:red",
            label="held-out pass@1 (sampled)")
    ax.plot(xs, [row.get("tool_call_rate", float("nan")) for row in curve], "^:", color="tab:green",
            label="held-out tool-call rate (sampled)")
    ax.axvline(-0.5, color="grey", lw=0.8)
    ax.text(-0.45, 0.02, "warm start", color="grey", fontsize=8)
    ax.set_xlabel("GRPO step (-1: the base model)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=20.0, help="training time budget (evaluation excluded)")
    parser.add_argument("--max-steps", type=int, default=400)
    parser.add_argument("--eval-every", type=int, default=8)
    parser.add_argument("--eval-tasks", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tools", default="", help="comma-separated tools the env offers (calculator); empty: none")
    parser.add_argument("--warm-start-steps", type=int, default=4,
                        help="with --tools: SFT steps on the scripted calculator agent's episodes before RL (0: none)")
    add_smoke_flag(parser, minutes=0.05, max_steps=1, eval_every=1, eval_tasks=4, warm_start_steps=1)
    args = parser.parse_args()

    tools = [name for name in args.tools.split(",") if name]
    env_kwargs: dict = {"levels": (args.level,), **({"tools": tools} if tools else {})}
    warm = bool(tools) and args.warm_start_steps > 0
    name = f"learning_L{args.level}" + "".join(f"_{tool}" for tool in tools)
    config = TrainConfig(env="Math-v0", env_kwargs=env_kwargs, steps=args.max_steps, seed=args.seed,
                         output_dir=f"/tmp/rubricgym-{name}", eval_tasks=0, checkpoint_every=0,
                         warm_start="scripted:calculator" if warm else "", warm_start_steps=args.warm_start_steps,
                         policy=PolicyConfig(cpu_threads="fixed"))  # fixed threads: reruns are bit-identical
    trainer = Trainer(config)
    eval_kwargs = {**env_kwargs, "split": "test"}

    def point(step: int, minutes: float, sampled: bool = False) -> dict:
        """Held-out accuracy (and with tools the sampled pass@1 and tool-call rates) at one step."""
        row = learning_point(trainer.policy, eval_kwargs, args.eval_tasks, step, minutes, env_id="Math-v0",
                             sampled=sampled)
        trainer.log({"step": step, **{f"eval_{key}": value for key, value in row.items() if key not in ("step", "minutes")}})
        return row

    train_seconds, minutes_to_90 = 0.0, None
    first = point(0, 0.0, sampled=bool(tools))
    acc_before = first["accuracy"]
    curve = [first]
    print(f"level {args.level}: held-out accuracy before = {acc_before:.3f}  {first}", flush=True)
    warm_point = None
    if warm:
        trainer.log({"step": 0, **trainer.warm_start()})
        warm_point = point(0, 0.0, sampled=True)
        curve.append({**warm_point, "warm_start": True})
        if warm_point["accuracy"] >= 0.9:  # the warm start alone got there, before any RL minute
            minutes_to_90 = 0.0
        print(f"after the warm start ({args.warm_start_steps} SFT steps): {warm_point}", flush=True)
    while trainer.step < args.max_steps and train_seconds < args.minutes * 60:
        start = time.perf_counter()
        stats = trainer.train_step()
        train_seconds += time.perf_counter() - start
        trainer.log(stats)
        if trainer.step % args.eval_every == 0:
            row = point(trainer.step, train_seconds / 60, sampled=bool(tools))
            accuracy = row["accuracy"]
            curve.append(row)
            print(f"step {trainer.step:3d}  {train_seconds / 60:5.1f} min  reward {stats['reward']:+.2f}  "
                  f"tokens {stats['mean_completion_tokens']:.0f}  held-out {row}", flush=True)
            if minutes_to_90 is None and accuracy >= 0.9:
                minutes_to_90 = train_seconds / 60
    last = point(trainer.step, train_seconds / 60, sampled=bool(tools))
    acc_after = last["accuracy"]
    if minutes_to_90 is None and acc_after >= 0.9:
        minutes_to_90 = train_seconds / 60
    curve.append(last)
    RESULTS.mkdir(parents=True, exist_ok=True)
    with_tools = f" with {', '.join(tools)}" if tools else ""
    title = f"GRPO, SmolLM2-135M + LoRA on CPU, level {args.level}{with_tools}: held-out {acc_before:.2f} -> {acc_after:.2f}"
    plot = (plot_tool_learning(curve, trainer.history, RESULTS / f"{name}.png", title) if tools
            else trainer.plot(RESULTS / f"{name}.png", title=title))
    command = "python " + " ".join([sys.argv[0].split("/")[-2] + "/" + sys.argv[0].split("/")[-1]] + sys.argv[1:])
    (RESULTS / f"{name}.json").write_text(json.dumps({
        "command": command, "level": args.level, "seed": args.seed, "tools": tools, "acc_before": acc_before,
        "acc_after": acc_after, "warm_start": warm_point, "warm_start_steps": args.warm_start_steps if warm else 0,
        "train_minutes": train_seconds / 60, "steps": trainer.step, "minutes_to_90": minutes_to_90, "curve": curve,
        "extraction": "last \\boxed{}, else last number", "eval": f"{args.eval_tasks} held-out test-split tasks, greedy",
        "config": {"grpo": trainer.config.grpo.__dict__, "policy": trainer.config.policy.__dict__,
                   "group_size": config.group_size, "groups_per_step": config.groups_per_step}}, indent=2, default=str))
    t90 = "none" if minutes_to_90 is None else f"{minutes_to_90:.1f}"
    print(f"plot: {plot}")
    extra = tool_learning_fields(first, warm_point, last) if tools else ""
    print(f"RESULT acc_before={acc_before:.3f} acc_after={acc_after:.3f} minutes={train_seconds / 60:.1f} "
          f"minutes_to_90={t90} level={args.level} seed={args.seed}{extra}")


if __name__ == "__main__":
    main()
