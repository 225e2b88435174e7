"""Which lever lowers the between-seed spread of the quick bench: RLVR and the random control at the
quick setting over many seeds, then again with one lever changed at a time.

The verdicts issue asks for the between-seed SD of RLVR at the quick setting before and after each
lever, since the spread decides how many seeds a claim needs (the MDD). Levers, each a change of
the ``rubricgym bench --quick`` preset (Math-v0, 2 GRPO steps of one group of 4, 16 held-out tasks):

* ``base``: the preset as it is;
* ``eval_tasks``: 64 held-out tasks instead of 16 (the same trained runs: a seed's training is
  deterministic, only the evaluation grows);
* ``budget``: the trainer's own batch, 4 groups of 8 per step, still 2 steps;
* ``steps_low_lr``: 8 steps at a quarter of the learning rate (5e-5).

Common random numbers are in every lever already (a seed's rows share its tasks and sampling
streams); what they buy is measured from the same runs: the SD of the paired differences (rlvr -
random, same seed) against the SD of unpaired ones (rlvr of seed i - random of seed i+1).
Held-out evaluation is greedy, so mean@k over sampled answers has no evaluation noise to average
here (it would change the metric, not its spread). Each cell is kept with its provenance
(``results/.cells``) and reused only when commit, config hash and packages match.

Per lever: RLVR's mean, its between-seed SD with a chi-square 95 % interval, the paired and
unpaired SD of rlvr - random, the MDD at 80 % power at this many seeds, the seeds a 0.10 MDD
needs, and the cells' minutes.

    python benchmarks/seed_variance.py                        # every lever, 8 seeds, 2 workers
    python benchmarks/seed_variance.py --levers base,eval_tasks --seeds 5
    python benchmarks/seed_variance.py --report-only          # reprint the stored RESULT lines
    python benchmarks/seed_variance.py --smoke                # the tiny model, 3 seeds, 2 levers (the plumbing)

Ends with one ``RESULT lever=<name> seeds=<n> rlvr=<m>[lo,hi] sd_rlvr=<s>[lo,hi] sd_paired=<p>
sd_unpaired=<u> mdd=<d> seeds_for_mdd_0.10=<k> minutes=<t> commit=<c>`` line per lever; writes
``seed_variance.json``, ``seed_variance.md`` and ``seed_variance.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402

from rubricgym.app.bench import short_commit  # noqa: E402
from rubricgym.app.flags import add_smoke_flag, doc_parser, results_dir  # noqa: E402

RESULTS = results_dir(__file__)
LEVERS = {"base": ("the quick preset", {}),
          "eval_tasks": ("64 held-out tasks (16)", {"eval_tasks": 64}),
          "budget": ("4 groups x 8 per step (1 x 4)", {"groups_per_step": 4, "group_size": 8}),
          "steps_low_lr": ("8 steps at lr 5e-5 (2 at 2e-4)", {"steps": 8, "learning_rate": 5e-5})}
ROWS = [{"name": "rlvr", "env": "Math-v0"}, {"name": "random", "env": "MathRandom-v0"}]
TARGET_MDD = 0.10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = doc_parser(__doc__)
    parser.add_argument("--levers", default=",".join(LEVERS), help="comma-separated levers (default: all)")
    parser.add_argument("--seeds", type=int, default=8, help="training seeds per lever (seeds 0..n-1)")
    parser.add_argument("--workers", type=int, default=2, help="cells at once (Ray; $RAY_ADDRESS for a cluster)")
    parser.add_argument("--cell-threads", type=int, default=1, help="torch threads per cell (the quick bench's: 1)")
    parser.add_argument("--model", default=None, help="policy base model (default: the default model)")
    parser.add_argument("--report-only", action="store_true", help="reprint the RESULT lines from seed_variance.json")
    add_smoke_flag(parser, argv, seeds=3, workers=1, model="tiny", levers="base,steps_low_lr")
    args = parser.parse_args(argv)
    args.levers = [name.strip() for name in args.levers.split(",") if name.strip()]
    unknown = sorted(set(args.levers) - set(LEVERS))
    if unknown:
        parser.error(f"unknown levers {unknown}; choose from {sorted(LEVERS)}")
    if args.seeds < 2:
        parser.error("--seeds must be at least 2: a spread needs two runs")
    if args.model == "tiny":
        from rubricgym.testing.tiny import tiny_model_dir

        args.model = str(tiny_model_dir())
    return args


def settings_of(lever: str, args: argparse.Namespace) -> dict[str, Any]:
    """The BenchConfig of one lever, as JSON (stored beside its results)."""
    from rubricgym.recipes.bench import QUICK_BENCH

    quick = {k: v for k, v in QUICK_BENCH.items() if k not in ("seeds", "judge_max_tokens", "judge_max_fixes")}
    settings = {"envs": ["Math-v0"], **quick, "seeds": list(range(args.seeds)), "model": args.model,
                "workers": args.workers, "cell_threads": args.cell_threads, "judge": "oracle:1.0",
                "output_dir": str(RESULTS), **LEVERS[lever][1]}
    if args.smoke:
        settings.update(max_new_tokens=8, eval_tasks=4, resamples=200, steps=min(settings["steps"], 2))
    return settings


def sd_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Sample SD with its chi-square 95 % interval (normal runs assumed)."""
    from scipy.stats import chi2

    n = len(values)
    sd = float(values.std(ddof=1))
    return sd, sd * float(np.sqrt((n - 1) / chi2.ppf(0.975, n - 1))), sd * float(np.sqrt((n - 1) / chi2.ppf(0.025, n - 1)))


def spread(per_seed: dict[str, list[float]]) -> dict[str, Any]:
    """The lever's spread figures from each row's per-seed held-out means (the same seeds in order)."""
    from rubricgym.app.stats import minimum_detectable_difference, seeds_for_mdd, t_interval

    rlvr, control = np.asarray(per_seed["rlvr"]), np.asarray(per_seed["random"])
    paired = rlvr - control
    unpaired = rlvr - np.roll(control, -1)  # seed i against the control's seed i + 1: no shared randomness
    sd, low, high = sd_interval(rlvr)
    sd_paired = float(paired.std(ddof=1))
    mean = t_interval(rlvr)
    return {"seeds": len(rlvr), "rlvr": {"mean": mean.mean, "low": mean.low, "high": mean.high},
            "sd_rlvr": {"sd": sd, "low": low, "high": high}, "sd_paired": sd_paired,
            "sd_unpaired": float(unpaired.std(ddof=1)), "correlation": float(np.corrcoef(rlvr, control)[0, 1])
            if rlvr.std() > 0 and control.std() > 0 else float("nan"),
            "difference": float(paired.mean()), "mdd": minimum_detectable_difference(sd_paired, len(paired)),
            "seeds_for_mdd": seeds_for_mdd(sd_paired, TARGET_MDD),
            "seeds_for_mdd_unpaired": seeds_for_mdd(float(unpaired.std(ddof=1)), TARGET_MDD)}


def measure(lever: str, args: argparse.Namespace, command: str) -> dict[str, Any]:
    from rubricgym.app.bench import bench_config_from_json, run_bench

    settings = settings_of(lever, args)
    started = time.perf_counter()
    done = {row["scheme"]: row for row in run_bench(bench_config_from_json(settings, ROWS, f"seed_variance_{lever}", command))}
    per_seed = {name: [float(np.mean(runs)) for runs in done[name]["solved"]] for name in ("rlvr", "random")}
    return {"lever": lever, "change": LEVERS[lever][0], "settings": settings, "per_seed": per_seed, **spread(per_seed),
            "cell_minutes": sum(float(done[name]["minutes"]) for name in done),
            "wall_minutes": (time.perf_counter() - started) / 60,
            "commit": (done["rlvr"].get("provenance") or {}).get("commit", "unknown")}


def result_line(r: dict[str, Any]) -> str:
    m, s = r["rlvr"], r["sd_rlvr"]
    return (f"RESULT lever={r['lever']} seeds={r['seeds']} rlvr={m['mean']:.3f}[{m['low']:.2f},{m['high']:.2f}] "
            f"sd_rlvr={s['sd']:.3f}[{s['low']:.3f},{s['high']:.3f}] sd_paired={r['sd_paired']:.3f} "
            f"sd_unpaired={r['sd_unpaired']:.3f} mdd={r['mdd']:.3f} seeds_for_mdd_{TARGET_MDD:.2f}={r['seeds_for_mdd'] or 'over_1000'} "
            f"minutes={r['cell_minutes']:.1f} commit={short_commit(r['commit'])}")


def write_results(results: dict[str, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "seed_variance.json").write_text(json.dumps(results, indent=1))
    lines = ["# Between-seed spread at the quick setting, lever by lever (`python benchmarks/seed_variance.py`)", "",
             "Math-v0, rows `rlvr` and `random`; per lever one change of the `--quick` preset. SD = between-seed SD of "
             "the held-out mean (chi-square 95 % interval); paired = SD of rlvr - random on the same seed; unpaired = "
             "rlvr of seed i - random of seed i+1; MDD at 80 % power at this many seeds.", "",
             "| lever | change | seeds | rlvr [95 % CI] | SD rlvr [95 % CI] | SD paired | SD unpaired | corr | MDD | seeds for MDD 0.10 (unpaired) | cell minutes | commit |",
             "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
    for r in results.values():
        m, s = r["rlvr"], r["sd_rlvr"]
        lines.append(f"| {r['lever']} | {r['change']} | {r['seeds']} | {m['mean']:.3f} [{m['low']:.2f}, {m['high']:.2f}] | "
                     f"{s['sd']:.3f} [{s['low']:.3f}, {s['high']:.3f}] | {r['sd_paired']:.3f} | {r['sd_unpaired']:.3f} | "
                     f"{r['correlation']:.2f} | {r['mdd']:.3f} | {r['seeds_for_mdd']} ({r['seeds_for_mdd_unpaired']}) | "
                     f"{r['cell_minutes']:.1f} | `{short_commit(r['commit'])}` |")
    lines += ["", "Per seed (held-out mean):", ""]
    lines += [f"- {r['lever']}: " + "; ".join(f"{name} " + ", ".join(f"{x:.3f}" for x in values)
                                             for name, values in r["per_seed"].items()) for r in results.values()]
    (RESULTS / "seed_variance.md").write_text("\n".join(lines) + "\n")
    names = list(results)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sds = [results[n]["sd_rlvr"] for n in names]
    ax.bar(x - 0.2, [s["sd"] for s in sds], 0.4, label="SD of rlvr over seeds",
           yerr=[[s["sd"] - s["low"] for s in sds], [s["high"] - s["sd"] for s in sds]], capsize=3)
    ax.bar(x + 0.2, [results[n]["sd_paired"] for n in names], 0.4, label="SD of rlvr - random (paired)")
    ax.set_xticks(x, names)
    ax.set_ylabel("held-out accuracy SD")
    ax.set_title("Between-seed spread, quick setting (Math-v0)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "seed_variance.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stored = RESULTS / "seed_variance.json"
    if args.report_only:
        if not stored.exists():
            print(f"no stored results at {stored}: run without --report-only first", file=sys.stderr)
            return 1
        for result in json.loads(stored.read_text()).values():
            print(result_line(result))
        return 0
    command = "python benchmarks/seed_variance.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    results = json.loads(stored.read_text()) if stored.exists() else {}
    for lever in args.levers:
        results[lever] = measure(lever, args, command)
        write_results(results)  # after each lever: a stopped run keeps what it measured
        print(result_line(results[lever]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
