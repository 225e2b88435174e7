"""Judge noise: GRPO under the errors real judges make, uncorrected and corrected from a calibrated profile.

The setting of benchmarks/judge_sensitivity.py (default model + LoRA, CPU, the built-in sums at one
level, the same weights, seeds, budget and held-out tasks for every run, paired 95 % bootstrap
intervals over seeds x tasks), with RULER alone as the reward (``MathRuler-v0``,
``combine="replace"``) from simulated judges that err as real ones do:

* ``flip_<p>``: the verifier's verdict flipped with probability p (``oracle:flip=<p>``; Lv et al.,
  arXiv 2505.22653);
* ``fpfn_<fp>_<fn>``: a pass / fail judge with separate false-positive and false-negative rates
  (``oracle:fp=<fp>,fn=<fn>``; Cai et al., arXiv 2510.00915);
* ``order_<q>``: a judge whose scores follow the presentation order with probability q
  (``oracle:order=<q>``), otherwise right.

A ``<row>_corrected`` row first calibrates its judge (``rubricgym judge-eval --calibrate`` on the
held-out math groups, the profile written beside the results) and then trains with
``--judge-correction <profile>`` (rubricgym.judges.correction: the reads the profile calls for,
combined into P(good | reads)). The target: a corrected judge keeps at least half of the gap
between its uncorrected run and RLVR.

    python benchmarks/judge_noise.py                     # every row (2 seeds, 8 steps, 64 held-out tasks)
    python benchmarks/judge_noise.py --rows rlvr,fpfn_0.3_0.05,fpfn_0.3_0.05_corrected
    python benchmarks/judge_noise.py --smoke             # one row, one step (the plumbing)

Finished runs are kept in /tmp/rubricgym-sensitivity/done (shared with judge_sensitivity.py), so
an interrupted sweep resumes. Ends with ``RESULT rlvr=<acc> flip_0.1=<acc> ... order_0.7_corrected=<acc>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from judge_sensitivity import RESULTS, run_name, train_and_evaluate  # noqa: E402  (this folder is on sys.path)

from rubricgym.app.flags import add_smoke_flag  # noqa: E402
from rubricgym.app.stats import paired_bootstrap  # noqa: E402

ROWS = ("rlvr", "fpfn_0.3_0.05", "fpfn_0.3_0.05_corrected", "order_0.7", "order_0.7_corrected",
        "fpfn_0.05_0.3", "fpfn_0.05_0.3_corrected", "flip_0.1", "flip_0.2", "flip_0.3", "flip_0.4", "flip_0.5")
"""Every row, the targeted ones first (a sweep cut short has those)."""

CORRECTED = "_corrected"


def judge_of(row: str) -> str:
    """The simulated judge of a row (``rlvr``: the verifier itself).

    Examples:
        >>> judge_of("fpfn_0.3_0.05_corrected"), judge_of("flip_0.4"), judge_of("order_0.7")
        ('oracle:fp=0.3,fn=0.05', 'oracle:flip=0.4', 'oracle:order=0.7')
    """
    kind, *values = row.removesuffix(CORRECTED).split("_")
    if kind == "rlvr":
        return "rlvr"
    if kind == "fpfn":
        return f"oracle:fp={values[0]},fn={values[1]}"
    if kind in ("flip", "order"):
        return f"oracle:{kind}={values[0]}"
    raise ValueError(f"unknown row {row!r}: rlvr, flip_<p>, fpfn_<fp>_<fn>, order_<q>, each optionally with {CORRECTED}")


def profile_for(judge: str, limit: int) -> str:
    """Calibrate ``judge`` on the held-out math groups (as ``rubricgym judge-eval --calibrate``
    does) and write its profile under the results; returns the profile's path."""
    from rubricgym.app.calibration import judge_profile, profile_line
    from rubricgym.judges.correction import JudgeCorrection

    path = RESULTS / "judge_noise_profiles" / f"{run_name(judge.removeprefix('oracle:'))}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = judge_profile(judge, groups="math", limit=limit, progress=False)
    path.write_text(json.dumps(profile, indent=1))
    print(f"  profile: {profile_line(profile)}\n  -> {JudgeCorrection.load(path).describe()}", flush=True)
    return str(path)


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows (default: all: {','.join(ROWS)})")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--eval-tasks", type=int, default=64)
    parser.add_argument("--calibration-groups", type=int, default=0, help="held-out math groups a profile reads (0: all)")
    parser.add_argument("--name", default="judge_noise", help="stem of the result files")
    add_smoke_flag(parser, rows="rlvr,fpfn_0.3_0.05_corrected", seeds=1, steps=1, eval_tasks=4, calibration_groups=4,
                   name="judge_noise_smoke")
    args = parser.parse_args()
    rows = [row.strip() for row in args.rows.split(",") if row.strip()]
    for row in rows:
        judge_of(row)  # an unknown row fails before any training
    if "rlvr" not in rows:
        rows.insert(0, "rlvr")  # every row is read against it
    started = time.perf_counter()
    before = train_and_evaluate("rlvr", 0, 0, args.level, args.eval_tasks)
    print(f"untrained held-out {np.mean(before):.3f}", flush=True)
    runs, profiles = {}, {}
    for row in rows:
        judge = judge_of(row)
        if row.endswith(CORRECTED):
            profiles[row] = profile_for(judge, args.calibration_groups)
        runs[row] = [train_and_evaluate(judge, seed, args.steps, args.level, args.eval_tasks, profiles.get(row, ""))
                     for seed in range(args.seeds)]
        print(f"{row:<26} held-out {np.mean(runs[row]):.3f}  per seed {[float(np.mean(r)) for r in runs[row]]}"
              f"  ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
    minutes = (time.perf_counter() - started) / 60
    table = paired_bootstrap(runs, reference="rlvr", before=before)
    kept = {}  # a corrected row against its own uncorrected run: the share of the gap to RLVR it closes
    for row in profiles:
        plain = row.removesuffix(CORRECTED)
        if plain in runs:
            gap = float(np.mean(runs["rlvr"]) - np.mean(runs[plain]))
            closed = float(np.mean(runs[row]) - np.mean(runs[plain]))
            kept[row] = {"gap": gap, "closed": closed, "share": closed / gap if gap > 0 else float("nan"),
                         "difference": asdict(paired_bootstrap({row: runs[row], plain: runs[plain]}, reference=plain,
                                                               before=before)[row].difference)}

    results = {row: {"judge": judge_of(row), "accuracy": table[row].mean.mean,
                     "ci": [table[row].mean.low, table[row].mean.high], "per_seed": [float(np.mean(r)) for r in runs[row]],
                     **table[row].as_dict(), "solved": [[int(x) for x in r] for r in runs[row]],
                     **({"profile": os.path.relpath(profiles[row], RESULTS.parent.parent), "correction": kept.get(row)}
                        if row in profiles else {})} for row in rows}
    command = ("python benchmarks/judge_noise.py " + shlex.join(sys.argv[1:])).strip()
    RESULTS.mkdir(parents=True, exist_ok=True)
    from rubricgym.app.provenance import provenance

    (RESULTS / f"{args.name}.json").write_text(json.dumps({"provenance": provenance(vars(args)),
        "command": command, "steps": args.steps, "seeds": args.seeds, "level": args.level, "eval_tasks": args.eval_tasks,
        "minutes": minutes, "before": float(np.mean(before)), "before_solved": before, "rows": results}))
    lines = [f"# Held-out accuracy under judge noise, uncorrected and corrected (`{command}`)", "",
             f"GRPO, default model + LoRA, CPU, level {args.level}, {args.steps} steps, {args.seeds} seed(s), "
             f"{args.eval_tasks} held-out tasks (the same for every run); RULER alone as the reward from the row's "
             f"simulated judge; paired 95 % bootstrap over seeds x tasks; untrained weights {np.mean(before):.3f}; "
             f"* = the interval excludes 0; {minutes:.1f} min for this invocation (finished runs are reused).", "",
             "| row | judge | held-out after [95 % CI] | gain over untrained | difference from RLVR | per seed |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {row} | {judge_of(row)} | {table[row].mean} | {table[row].gain.signed()} | "
              f"{table[row].difference.signed() if table[row].difference else ''} | "
              f"{', '.join(f'{x:.3f}' for x in results[row]['per_seed'])} |" for row in rows]
    if kept:
        lines += ["", "Corrections against their uncorrected runs (target: at least half the gap to RLVR closed):", "",
                  "| row | gap to RLVR (uncorrected) | closed by the correction [95 % CI, paired] | share of the gap | correction |",
                  "| --- | --- | --- | --- | --- |"]
        from rubricgym.judges.correction import JudgeCorrection

        for row, k in kept.items():
            d = k["difference"]
            lines.append(f"| {row} | {k['gap']:+.3f} | {d['mean']:+.3f} [{d['low']:+.2f}, {d['high']:+.2f}] | "
                         f"{k['share']:.2f} | {JudgeCorrection.load(profiles[row]).describe()} |")
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")

    figure, axis = plt.subplots(figsize=(7.5, 4))
    names = [row for row in rows if row != "rlvr"]
    colors = ["tab:green" if row.endswith(CORRECTED) else "tab:blue" for row in names]
    means = [results[row]["accuracy"] for row in names]
    errors = [[m - results[row]["ci"][0] for row, m in zip(names, means)], [results[row]["ci"][1] - m for row, m in zip(names, means)]]
    axis.bar(range(len(names)), means, yerr=errors, color=colors, capsize=3)
    rlvr = results["rlvr"]
    axis.axhspan(rlvr["ci"][0], rlvr["ci"][1], color="green", alpha=0.12, label=f"RLVR {rlvr['accuracy']:.2f}")
    axis.axhline(float(np.mean(before)), color="black", lw=0.8, ls="--", label=f"untrained {np.mean(before):.2f}")
    axis.set_xticks(range(len(names)), [row.replace(CORRECTED, "\ncorrected") for row in names], rotation=60, fontsize=7)
    axis.set(ylabel="held-out accuracy after training", ylim=(0, 1.02),
             title=f"Judge noise, uncorrected (blue) and corrected (green); level {args.level}, {args.steps} steps")
    axis.legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    figure.savefig(RESULTS / f"{args.name}.png", dpi=120)
    print("RESULT " + " ".join(f"{row}={results[row]['accuracy']:.3f}" for row in rows) + f" minutes={minutes:.1f}")


if __name__ == "__main__":
    main()
