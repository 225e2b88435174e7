"""Train the judge, then close the loop: does a judged reward from a small trained judge train the
agent as well as the verifier?

1. Judge training on ``JudgeGroup-v0``'s built-in math groups (the default model's own answers to
   level-1 sums, labelled by the verifier; generator train tasks): SFT distillation of the
   verifier's judgements (default model + LoRA), then GRPO on the judge env from the SFT adapter.
   ``--scoring pointwise`` (default): one answer per prompt, balanced rows, the score read by
   probability; ``sampled``: the group reply, written (the first recipe). Held-out pairwise
   accuracy (groups of the generator's test tasks, never trained on) over training steps is plotted.
2. Held-out measurement of the judges as RULER uses them (``local:<checkpoint>``), LLMBar Natural
   beside the paper's rows, against the untrained judge.
3. The bench rows: ``rubricgym bench`` on Math-v0 with the default budget and seeds, ``ruler`` and
   ``ruler+rlvr`` with the trained judge beside ``rlvr`` (reused from the default table where it
   was measured with the same seeds and budget); paired intervals over seeds x held-out tasks, the
   trained judge's cost per step, and the difference from ``ruler`` with the untrained judge.

    python benchmarks/judge_training.py                 # the measured run (see docs/judges.md)
    python benchmarks/judge_training.py --smoke         # seconds-to-minutes, for CI

Ends with ``RESULT sft_math_pairwise=<a> grpo_math_pairwise=<b> llmbar_natural=<c>
untrained_math_pairwise=<d> ruler_trained_gain=<g>[<lo>,<hi>] rlvr_gain=<r>[<lo>,<hi>] gain_kept=<g/r>
[ruler_trained_vs_untrained=<d>[<lo>,<hi>]]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402
from rubricgym.app.stages import stage, work_folder  # noqa: E402
from rubricgym.app.stats import Interval  # noqa: E402

RESULTS = results_dir(__file__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--scoring", default="pointwise", choices=["pointwise", "sampled"],
                        help="pointwise: one answer per prompt, its score read by probability (train-judge --pointwise); "
                        "sampled: RULER's group reply, written (the first recipe)")
    parser.add_argument("--reference", action="store_true",
                        help="reference-guided judge (train-judge --reference): its prompt names the task's reference "
                        "answer and the bench rows are ruler_ref / ruler_ref+rlvr; results under judge_training_reference*")
    parser.add_argument("--sft-epochs", type=float, default=None,
                        help="passes over the SFT rows (default: 1, or 1.5 reference-guided)")
    parser.add_argument("--sft-learning-rate", type=float, default=2e-4, help="SFT's learning rate")
    parser.add_argument("--counterfactual", action="store_true",
                        help="with --reference: the SFT rows also show each answer under a reference that flips its "
                        "verdict (JudgeTrainingConfig.counterfactual_references)")
    parser.add_argument("--sft-orders", default="recorded,reversed", help="presentation orders of each group in the SFT rows")
    parser.add_argument("--grpo-steps", type=int, default=4)
    parser.add_argument("--grpo-group-size", type=int, default=4)
    parser.add_argument("--grpo-groups-per-step", type=int, default=4)
    parser.add_argument("--eval-every", type=int, default=None,
                        help="optimiser steps between held-out points of the curve (default: 18, or 36 reference-guided)")
    parser.add_argument("--curve-groups", type=int, default=0, help="held-out groups per point of the curve (0: all)")
    parser.add_argument("--judge-groups", type=int, default=12,
                        help="held-out math groups read again with the checkpoint loaded as local:<checkpoint> (0: all)")
    parser.add_argument("--llmbar-pairs", type=int, default=10, help="LLMBar Natural pairs (both orders)")
    parser.add_argument("--bench-steps", type=int, default=6, help="the bench's steps per scheme (its default budget)")
    parser.add_argument("--bench-eval-tasks", type=int, default=48)
    parser.add_argument("--seeds", default="0", help="comma-separated training seeds of the bench rows")
    parser.add_argument("--work", default=None,
                        help="checkpoints; a training stage finished there is reused (delete the folder to retrain); "
                        "default /tmp/rubricgym-judge-training[-reference]")
    add_smoke_flag(parser, argv, sft_epochs=0.02, grpo_steps=1, grpo_group_size=2, grpo_groups_per_step=1, eval_every=1,
                   curve_groups=2, judge_groups=1, llmbar_pairs=1,
                   bench_steps=1, bench_eval_tasks=2, work="/tmp/rubricgym-judge-training-smoke")
    args = parser.parse_args(argv)
    # the measured runs' budgets (docs/judges.md)
    args.sft_epochs = args.sft_epochs if args.sft_epochs is not None else (1.5 if args.reference else 1.0)
    args.eval_every = args.eval_every if args.eval_every is not None else (36 if args.reference else 18)
    args.work = args.work or "/tmp/rubricgym-judge-training" + ("-reference" if args.reference else "")
    return args


def results_name(args) -> str:
    """``judge_training`` (the judge reads the answer alone) or ``judge_training_reference``."""
    return "judge_training" + ("_reference" if args.reference else "")


def interval(value: dict) -> str:
    return Interval.of(value).token()


def signed(value: dict | None) -> str:
    return "" if value is None else Interval.of(value).signed()


def measure_judges(args, judges: dict[str, str], stages: dict[str, dict]) -> tuple[dict, dict, dict, str]:
    """Held-out pairwise accuracy of each judge (both orders), the best one as RULER calls it,
    and LLMBar Natural for the untrained and the best judge."""
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.app.judge_training import judge_env, policy_pairwise, ruler_pairwise
    from rubricgym.app.llmbar import judge_pairs
    from rubricgym.judges.ruler import RulerConfig

    if args.scoring == "pointwise":
        # the curves already read every judge on every held-out group as RULER does (each answer
        # alone, by probability): untrained = SFT's step 0, then each stage's last point. One
        # prompt per answer: the presentation order cannot matter (no position bias to measure).
        measured = {"untrained": stages["sft"]["curve"][0], "sft": stages["sft"]["curve"][-1],
                    "grpo": stages["grpo"]["curve"][-1]}
        best = max(("sft", "grpo"), key=lambda name: measured[name]["pairwise"])
        # the best judge loaded as every setting loads it (local:<checkpoint>, merged), with its cost
        as_used = {k: v for k, v in ruler_pairwise(judges[best], judge_env("math", "test", reference=args.reference),
                                                   args.judge_groups, scoring="pointwise").items() if k not in ("per_group", "member_scores")}
        llmbar = {}
        for name in ("untrained", best):
            verdicts = judge_pairs(judges[name], "natural", args.llmbar_pairs, config=RulerConfig(scoring="pointwise"))
            llmbar[name] = {"accuracy": verdicts.accuracy, "both": verdicts.both_correct, "pairs": verdicts.pairs}
        return measured, as_used, llmbar, best

    measured: dict[str, dict] = {}
    for name in judges:  # greedy replies, batched: every judge in both presentation orders
        policy = Policy(PolicyConfig(max_new_tokens=96, lora_r=0, model=None if name == "untrained" else judges[name][6:]))
        for order in ("recorded", "reversed"):
            measured[f"{name}:{order}"] = policy_pairwise(policy, judge_env("math", "test", order=order), args.judge_groups)
        measured[name] = {"pairwise": (measured[f"{name}:recorded"]["pairwise"] + measured[f"{name}:reversed"]["pairwise"]) / 2}
        del policy
    best = max(("sft", "grpo"), key=lambda name: measured[name]["pairwise"])
    # the best judge as RULER calls it (constrained decoding), with its cost
    as_used = {k: v for k, v in ruler_pairwise(judges[best], judge_env("math", "test"), args.judge_groups).items()
               if k not in ("per_group", "member_scores")}
    llmbar = {}
    for name in ("untrained", best):
        verdicts = judge_pairs(judges[name], "natural", args.llmbar_pairs,
                               config=RulerConfig(explanation_max_chars=0, max_tokens=128, max_fixes=0))
        llmbar[name] = {"accuracy": verdicts.accuracy, "both": verdicts.both_correct, "pairs": verdicts.pairs}
    return measured, as_used, llmbar, best


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.sft import SFTConfig
    from rubricgym.app.bench import BenchConfig, run_bench
    from rubricgym.app.judge_training import JudgeTrainingConfig, plot_curve, train_judge

    work = work_folder(args.work, fresh=args.smoke)
    RESULTS.mkdir(parents=True, exist_ok=True)
    smoke = args.smoke
    pointwise = args.scoring == "pointwise"
    common = dict(eval_every=args.eval_every, max_eval_groups=args.curve_groups, pointwise=pointwise, reference=args.reference)
    start = time.perf_counter()
    sft = stage(work / "sft", lambda: train_judge(JudgeTrainingConfig(
        method="sft", sft=SFTConfig(epochs=args.sft_epochs, learning_rate=args.sft_learning_rate), output_dir=str(work / "sft"),
        counterfactual_references=args.counterfactual,
        sft_orders=tuple(args.sft_orders.split(",")), **common)))
    grpo = stage(work / "grpo", lambda: train_judge(JudgeTrainingConfig(
        method="grpo", grpo_steps=args.grpo_steps, group_size=args.grpo_group_size, groups_per_step=args.grpo_groups_per_step,
        output_dir=str(work / "grpo"), policy=PolicyConfig(max_new_tokens=96, adapter=sft["checkpoint"]),
        measure_start=False, **common)))  # its start is the SFT curve's last point
    training_minutes = {name: run.get("training_minutes", run["minutes"]) for name, run in (("sft", sft), ("grpo", grpo))}
    training_minutes.update({f"{name}_readings": run["minutes"] - training_minutes[name] for name, run in (("sft", sft), ("grpo", grpo))})
    curve = sft["curve"] + [{**r, "step": r["step"] + sft["curve"][-1]["step"]} for r in grpo["curve"]]
    plot_curve(curve, RESULTS / f"{results_name(args)}_curve.png",
               "judge training on JudgeGroup-v0 (math): held-out pairwise accuracy, " + (
                   "each answer alone, read by probability" if pointwise else "greedy replies")
               + (", reference-guided" if args.reference else ""))

    judges = {"untrained": "local", "sft": f"local:{sft['checkpoint']}", "grpo": f"local:{grpo['checkpoint']}"}
    measured_file = work / "measured.json"  # the judges' held-out numbers, kept for a rerun of the bench part
    if measured_file.is_file():
        saved = json.loads(measured_file.read_text())
        measured, as_used, llmbar, best = saved["measured"], saved["as_used"], saved["llmbar"], saved["best"]
    else:
        measured, as_used, llmbar, best = measure_judges(args, judges, {"sft": sft, "grpo": grpo})
        measured_file.write_text(json.dumps({"measured": measured, "as_used": as_used, "llmbar": llmbar, "best": best}))

    seeds = tuple(int(s) for s in args.seeds.split(","))
    budget = dict(envs=("Math-v0",), steps=args.bench_steps, eval_tasks=args.bench_eval_tasks, seeds=seeds,
                  output_dir=str(RESULTS))
    if smoke:
        budget.update(group_size=2, groups_per_step=1, max_new_tokens=8, resamples=200, judge_max_tokens=64, judge_max_fixes=0)
    # one bench run: the verifier's row (always first, the reference) and the trained judge's rows;
    # the untrained judge's ruler rows are in the default table (reward_schemes_full.md: +0.000)
    ruler = "ruler_ref" if args.reference else "ruler"
    bench_name = f"{results_name(args)}_bench"
    rows = {r["scheme"]: r for r in run_bench(BenchConfig(
        schemes=(ruler, f"{ruler}+rlvr"), judge=judges[best], results_name=bench_name, judge_scoring=args.scoring,
        command=f"benchmarks/judge_training.py{' --reference' if args.reference else ''} ({ruler} with the {best} judge)",
        **budget,
        # RLVR's row is the default table's (the same seeds and budget; no judge in it)
        # (a rerun also reuses this script's own rows: only what is missing trains)
        reuse=() if smoke else tuple(str(RESULTS / f) for f in ("rlcer.json", "reward_schemes_full.json",
                                                               f"{bench_name}.json") if (RESULTS / f).is_file())))}
    rlvr_gain, ruler_gain = rows["rlvr"]["gain"], rows[ruler]["gain"]
    gain_kept = ruler_gain["mean"] / rlvr_gain["mean"] if rlvr_gain["mean"] > 0 else float("nan")
    over_untrained = None if smoke else versus_untrained_judge(rows[ruler])
    write_results(args, sft, grpo, curve, measured, as_used, llmbar, rows, training_minutes, best, gain_kept,
                  (time.perf_counter() - start) / 60, over_untrained)
    print(f"RESULT sft_math_pairwise={measured['sft']['pairwise']:.3f} grpo_math_pairwise={measured['grpo']['pairwise']:.3f} "
          f"llmbar_natural={llmbar[best]['accuracy']:.3f} untrained_math_pairwise={measured['untrained']['pairwise']:.3f} "
          f"ruler_trained_gain={interval(ruler_gain)} rlvr_gain={interval(rlvr_gain)} "
          f"gain_kept={gain_kept:.2f}" + (f" ruler_trained_vs_untrained={interval(over_untrained)}" if over_untrained else ""))
    return 0


def versus_untrained_judge(trained_row: dict) -> dict | None:
    """RULER with the trained judge against RULER with the untrained one (the default table's row,
    same seeds, budget and held-out tasks): the paired difference of held-out success."""
    from rubricgym.app.stats import paired_bootstrap

    path = RESULTS / "reward_schemes_full.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    untrained = [r for r in data["rows"] if r["scheme"] == "ruler" and r["suite"] in ("math", "Math-v0")]
    if not untrained or (untrained[0]["seeds"], untrained[0]["before_solved"]) != (trained_row["seeds"],
                                                                               trained_row["before_solved"]):
        return None  # not the same seeds and held-out tasks: no paired comparison
    table = paired_bootstrap({"untrained": untrained[0]["solved"], "trained": trained_row["solved"]}, reference="untrained")
    difference = table["trained"].difference
    return {"mean": difference.mean, "low": difference.low, "high": difference.high}


def write_results(args, sft, grpo, curve, measured, as_used, llmbar, rows, training_minutes, best, gain_kept, minutes,
                  over_untrained: dict | None = None) -> None:
    from rubricgym.app.llmbar import published_rows

    published = {k: v for k, v in published_rows("natural").items() if k.endswith("(Vanilla)")}
    lines = [f"# Judge training, then RULER with the trained judge (`python benchmarks/judge_training.py"
             f"{' --smoke' if args.smoke else ''}`)", "",
             f"Judge: default model + LoRA, scoring {args.scoring}"
             + (", reference-guided (the prompt names the task's reference answer, as MathRulerRef-v0's judge reads it)"
                if args.reference else ", no reference (the judge reads the answer alone)")
             + ". SFT on the verifier's judgements of the built-in math groups"
             + (" with counterfactual references (each answer also under a reference that flips its verdict)"
                if args.counterfactual else "")
             + f" ({args.sft_epochs:g} epoch(s) at learning rate {args.sft_learning_rate:g}, "
             f"{training_minutes['sft']:.1f} min training + {training_minutes['sft_readings']:.1f} min of held-out readings), "
             f"then GRPO on JudgeGroup-v0 from the SFT adapter ({args.grpo_steps} steps, {training_minutes['grpo']:.1f} min "
             f"training + {training_minutes['grpo_readings']:.1f} min of readings). Held-out: groups of the generator's "
             f"test tasks. {minutes:.0f} min this invocation (finished stages and bench rows are reused; each one's "
             "own minutes are given).", ""]
    groups = max(1, as_used["groups"])
    if args.scoring == "pointwise":
        lines += ["Held-out math groups (all of them), pairwise accuracy as RULER reads the judge with "
                  "`scoring=\"pointwise\"`: each answer alone in its prompt, the score's first decimal read by probability "
                  "(no reply to malform, no presentation order to be biased by):", "",
                  "| judge | pairwise | read at |", "| --- | ---: | --- |"]
        lines += [f"| {name} | {measured[name]['pairwise']:.3f} | {where} |" for name, where in (
            ("untrained", "SFT step 0"), ("sft", f"SFT step {sft['curve'][-1]['step']}"),
            ("grpo", f"GRPO step {grpo['curve'][-1]['step']} (after SFT)"))]
        lines += ["", f"The {best} judge loaded as `local:<checkpoint>` (merged adapter), as every judge setting loads it: "
                  f"pairwise {as_used['pairwise']:.3f} on {as_used['groups']} groups, {as_used['prompt_tokens'] / groups:.0f} "
                  f"prompt tokens and {as_used['seconds_per_group']:.1f} s per group (no completion tokens: nothing is written)."]
    else:
        lines += ["Held-out math groups, pairwise accuracy of each judge's greedy reply (a malformed reply counts 0.5):", "",
                  "| judge | recorded order | reversed order | mean | valid replies (recorded / reversed) |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for name in ("untrained", "sft", "grpo"):
            rec, rev = measured[f"{name}:recorded"], measured[f"{name}:reversed"]
            lines.append(f"| {name} | {rec['pairwise']:.3f} | {rev['pairwise']:.3f} | {measured[name]['pairwise']:.3f} | "
                         f"{rec['valid']:.2f} / {rev['valid']:.2f} |")
        lines += ["", f"The {best} judge as RULER calls it (`local:<checkpoint>`, constrained decoding, recorded order): pairwise "
                  f"{as_used['pairwise']:.3f} on {as_used['groups']} groups, {as_used['failed']} failed calls, "
                  f"{as_used['prompt_tokens'] / groups:.0f} prompt / {as_used['completion_tokens'] / groups:.0f} completion tokens "
                  f"and {as_used['seconds_per_group']:.1f} s per group."]
    lines += ["", f"LLMBar Natural ({llmbar['untrained']['pairs']} pairs, both orders; not a target: a 135M student of math "
              "groups is not expected to judge open instructions):", ""]
    lines += [f"- {name}: accuracy {v['accuracy']:.3f}, both orders right {v['both']:.3f}" for name, v in llmbar.items()]
    lines += [f"- published {name}: accuracy {v['accuracy']:.3f}" for name, v in published.items()]
    lines += ["", f"Bench rows (Math-v0, {args.bench_steps} steps, seeds {args.seeds}, {args.bench_eval_tasks} held-out tasks; "
              f"trained judge: {best}); paired 95 % intervals over seeds x tasks; * = excludes 0.", "",
              "| row | held-out after | gain over untrained weights | difference from rlvr | judge calls | judge tokens (prompt / completion) | minutes |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, row in rows.items():
        difference = signed(row["difference"]) if name != "rlvr" else "(reference)"
        after = row["mean"]
        lines.append(f"| {name} | {after['mean']:.3f} [{after['low']:.2f}, {after['high']:.2f}] | {signed(row['gain'])} | {difference} | "
                     f"{row.get('judge_calls', 0):.0f} | {row.get('judge_prompt_tokens', 0):.0f} / {row.get('judge_completion_tokens', 0):.0f} | "
                     f"{row.get('minutes', 0):.1f} |")
    ruler = "ruler_ref" if args.reference else "ruler"
    lines += ["", f"gain kept by {ruler} with the trained judge: {gain_kept:.2f} of RLVR's"]
    if over_untrained:
        lines += ["", f"{ruler} with the trained judge against ruler with the untrained judge (the default table's row, "
                  f"reward_schemes_full.md: same seeds, budget and held-out tasks): {signed(over_untrained)}"]
    (RESULTS / f"{results_name(args)}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{results_name(args)}.json").write_text(json.dumps(
        {"args": vars(args), "curve": curve, "measured": measured, "as_used": as_used, "llmbar": llmbar, "bench": rows,
         "training_minutes": training_minutes, "best": best, "gain_kept": gain_kept, "over_untrained": over_untrained,
         "checkpoints": {"sft": sft["checkpoint"], "grpo": grpo["checkpoint"]}}, indent=1, default=str))


if __name__ == "__main__":
    raise SystemExit(main())
