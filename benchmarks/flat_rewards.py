"""Where pass/fail is flat: judged and partial-credit rewards against RLVR and a random control on
multi-turn tool use and agentic RAG, >= 3 seeds, paired by seed.

Per family (``ToolUse-v0``; ``RagSupport-v0`` with ``mode="agentic"``), every row starts from the
same warm start (SFT on the family's ``reference`` scripted agent's solved train-split turns, kept in
``--work``) and trains ``--steps`` GRPO steps with the same budget; only the reward differs:

* ``rlvr``: the family's verified end state (pass/fail);
* ``partial``: the mean of the family's partial-credit parts (``ChatEnv.partial_credit``,
  docs/rewards.md);
* ``ruler_trained``: RULER alone, the judge trained for this family by ``rubricgym train-judge
  --env <id> --method sft`` (kept in ``--work``; its pairwise accuracy on the family's unseen
  groups is measured by ``judge-eval --calibrate`` and printed);
* ``ruler_oracle``: RULER alone from a simulated judge of accuracy 0.8 (the signal apart from a real
  judge's quality);
* ``random``: Bernoulli(0.5) per completion (the control: a scheme that does not beat it has shown nothing).

Held-out success is the family's own check on its test split, greedy, the same tasks for every
run. Per row: the mean over seeds with a Student's t 95 % interval, the paired difference to
``rlvr`` (interval, MDD, P(improvement), verdict: established only with >= 3 seeds and an interval
excluding 0), ``zero_variance_fraction`` (share of training groups whose members all got one
reward: nothing to learn from), and the held-out tool use (valid-call rate, calls per episode).
Each cell (row, seed) is kept with its provenance (commit, config hash, packages) under
``results/.cells`` and reused only when all three match.

    python benchmarks/flat_rewards.py                              # both families, 3 seeds
    python benchmarks/flat_rewards.py --envs ToolUse-v0 --rows rlvr,partial,random
    python benchmarks/flat_rewards.py --report-only                # reprint the stored RESULT lines
    python benchmarks/flat_rewards.py --cell ToolUse-v0:partial:1  # recompute one cell, compare
    python benchmarks/flat_rewards.py --smoke                      # the tiny model, 1 step (the plumbing)

Ends with one ``RESULT env=<id> rlvr=<a>[lo,hi] partial=<b>[lo,hi] ruler_trained=<c>[lo,hi]
ruler_oracle=<d>[lo,hi] random=<e>[lo,hi] seeds=<n> zero_variance_rlvr=<z1> zero_variance_ruler=<z2>
best=<row> best_minus_rlvr=<d>[lo,hi] verdict=<v> judge_pairwise=<p> minutes=<m> commit=<c>`` line per
family; writes ``flat_rewards.json``, ``flat_rewards.md`` and ``flat_rewards.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402

from rubricgym.app.bench import short_commit  # noqa: E402
from rubricgym.app.flags import add_smoke_flag, doc_parser, results_dir  # noqa: E402

RESULTS = results_dir(__file__)
FAMILIES = {"ToolUse-v0": {}, "RagSupport-v0": {"mode": "agentic"}}
ROWS = ("rlvr", "partial", "ruler_trained", "ruler_oracle", "random")
ORACLE = "oracle:0.8"
JUDGED = ("partial", "ruler_trained", "ruler_oracle")
"""The rows whose best one is compared with ``rlvr`` (the issue's target: >= 0.50 held-out on
ToolUse-v0, above rlvr with an interval that excludes 0, zero_variance_fraction <= 0.3)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = doc_parser(__doc__)
    parser.add_argument("--envs", default=",".join(FAMILIES), help="comma-separated families (default: both)")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows (rlvr always runs: the reference)")
    parser.add_argument("--seeds", type=int, default=3, help="training seeds per row (seeds 0..n-1; >= 3 for a claim)")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per run (after the warm start)")
    parser.add_argument("--eval-tasks", type=int, default=28, help="held-out tasks per run (the same for every run)")
    parser.add_argument("--warm-start-steps", type=int, default=8, help="SFT steps (8 rows each) of the shared warm start")
    parser.add_argument("--judge-groups", type=int, default=64, help="recorded train groups for the family's judge")
    parser.add_argument("--judge-epochs", type=float, default=2.0, help="SFT passes of the family's judge")
    parser.add_argument("--model", default=None, help="policy and judge base model (default: the default model)")
    parser.add_argument("--workers", type=int, default=1, help="processes for the cells (Ray; $RAY_ADDRESS for a cluster)")
    parser.add_argument("--cell-threads", type=int, default=2, help="torch threads per cell (fixed: it is in the provenance)")
    parser.add_argument("--work", default="/tmp/rubricgym-flat", help="warm starts and trained judges (a finished stage is kept)")
    parser.add_argument("--report-only", action="store_true", help="reprint the RESULT lines from flat_rewards.json")
    parser.add_argument("--cell", default="", metavar="ENV:ROW:SEED",
                        help="recompute one stored cell and compare its held-out results with the stored ones")
    add_smoke_flag(parser, argv, envs="ToolUse-v0", seeds=2, steps=1, eval_tasks=2, warm_start_steps=1, judge_groups=2,
                   judge_epochs=0.5, model="tiny", cell_threads=1, work="/tmp/rubricgym-flat-smoke")
    args = parser.parse_args(argv)
    args.envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    args.rows = list(dict.fromkeys(["rlvr", *(r.strip() for r in args.rows.split(",") if r.strip())]))
    unknown = [e for e in args.envs if e not in FAMILIES] + [r for r in args.rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown {unknown}: families {', '.join(FAMILIES)}; rows {', '.join(ROWS)}")
    if args.model == "tiny":
        from rubricgym.testing.tiny import tiny_model_dir

        args.model = str(tiny_model_dir())
    return args


# -- stages (kept in --work) ----------------------------------------------------------------


def warm_start(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """SFT on the ``reference`` scripted agent's solved train-split turns; the checkpoint and its held-out success."""
    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.sft import SFTConfig, sft
    from rubricgym.app.stages import stage
    from rubricgym.registration import family_class, held_out, training_kwargs

    folder = Path(args.work) / env_id / f"warm-{args.warm_start_steps}"

    def run() -> dict[str, Any]:
        started = time.perf_counter()
        kwargs = training_kwargs(env_id, FAMILIES[env_id])
        rows = family_class(env_id).scripted_sft_rows("reference", episodes=64, seed=0, env_kwargs=kwargs)
        policy = Policy(PolicyConfig(model=args.model, cpu_threads="fixed"))
        history = sft(policy, rows, SFTConfig(epochs=args.warm_start_steps * 8 / len(rows), batch_size=8, learning_rate=1e-3,
                                              seed=0), output_dir=folder)
        base, test_kwargs = held_out(env_id, FAMILIES[env_id])
        result = evaluate(policy, test_kwargs, tasks=args.eval_tasks, env_id=base, per_task=True)
        return {"checkpoint": str(folder / f"checkpoint-{len(history)}"), "rows": len(rows), "steps": len(history),
                "loss_last": history[-1]["loss"], "held_out": float(np.mean(result["solved"])),
                "held_out_tool_use": {k: v for k, v in result.items() if k != "solved"},
                "minutes": (time.perf_counter() - started) / 60}

    print(f"{env_id}: warm start ({args.warm_start_steps} SFT steps on the reference agent's turns) in {folder}", flush=True)
    return stage(folder, run)


def trained_judge(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """The family's judge (``train-judge --env``, SFT) and its calibration on the family's unseen groups."""
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.sft import SFTConfig
    from rubricgym.app.calibration import judge_profile
    from rubricgym.app.judge_training import JudgeTrainingConfig, train_judge
    from rubricgym.app.stages import stage

    folder = Path(args.work) / env_id / f"judge-sft-{args.judge_epochs:g}-groups{args.judge_groups}"

    def run() -> dict[str, Any]:
        started = time.perf_counter()
        done = train_judge(JudgeTrainingConfig(env=env_id, env_groups=args.judge_groups, method="sft",
                                               sft=SFTConfig(epochs=args.judge_epochs), output_dir=str(folder),
                                               policy=PolicyConfig(model=args.model, max_new_tokens=96, temperature=1.0)))
        profile = judge_profile(f"local:{done['checkpoint']}", groups=str(folder / "groups-test.jsonl"), progress=False)
        return {"checkpoint": done["checkpoint"], "held_out_pairwise": done["held_out_pairwise"], "profile": profile,
                "minutes": (time.perf_counter() - started) / 60}

    print(f"{env_id}: the family's judge (train-judge --env {env_id} --method sft) in {folder}", flush=True)
    return stage(folder, run)


# -- rows --------------------------------------------------------------------------------------


def bench_rows(env_id: str, rows: list[str], adapter: str, judge: str | None) -> list[dict[str, Any]]:
    """The rows' env ids and knobs (every one from the same warm start)."""
    stem = env_id.removesuffix("-v0")
    made = {"rlvr": (env_id, {}), "partial": (f"{stem}Partial-v0", {}),
            "ruler_trained": (f"{stem}Ruler-v0", {"judge": f"local:{judge}", "combine": "replace"}),
            "ruler_oracle": (f"{stem}Ruler-v0", {"judge": ORACLE, "combine": "replace"}),
            "random": (f"{stem}Random-v0", {})}
    return [{"name": name, "env": made[name][0], "knobs": made[name][1], "adapter": adapter} for name in rows]


def bench_settings(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """The BenchConfig of one family, as JSON (stored, so one cell can be recomputed exactly)."""
    settings = dict(envs=[env_id], env_kwargs=FAMILIES[env_id], steps=args.steps, seeds=list(range(args.seeds)),
                    eval_tasks=args.eval_tasks, model=args.model, workers=args.workers, cell_threads=args.cell_threads,
                    judge="oracle:1.0", output_dir=str(RESULTS))  # every judged row names its own judge
    if args.smoke:
        settings.update(group_size=2, groups_per_step=1, max_new_tokens=8, resamples=200)
    return settings


# -- measuring ---------------------------------------------------------------------------------


def measure(env_id: str, args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The family's stages and bench; its result (what flat_rewards.json keeps per family)."""
    from rubricgym.app.bench import bench_config_from_json, run_bench
    from rubricgym.app.stats import seed_table

    started = time.perf_counter()
    warm = warm_start(env_id, args)
    judge = trained_judge(env_id, args) if "ruler_trained" in args.rows else None
    rows = bench_rows(env_id, args.rows, warm["checkpoint"], judge["checkpoint"] if judge else None)
    settings = bench_settings(env_id, args)
    done = run_bench(bench_config_from_json(settings, rows, f"flat_rewards_{env_id.removesuffix('-v0')}", command))
    by_name = {r["scheme"]: r for r in done}
    table = seed_table({name: by_name[name]["solved"] for name in args.rows}, reference="rlvr")
    judged = [name for name in JUDGED if name in by_name]
    best = max(judged, key=lambda name: table[name].mean.mean) if judged else None
    return {"env": env_id, "env_kwargs": FAMILIES[env_id], "seeds": args.seeds, "settings": settings, "rows": rows,
            "warm_start": warm, "judge": judge, "best": best,
            "table": {name: stats.as_dict() for name, stats in table.items()},
            "per_row": {name: {key: by_name[name].get(key) for key in (
                "solved", "held_out_after_per_seed", "zero_variance_fraction", "held_out_tool_call_rate", "held_out_valid_call_rate",
                "held_out_tool_calls_per_episode", "mean_train_reward", "judge_calls", "judge_failed_groups", "minutes",
                "reused")} for name in args.rows},
            "commit": (by_name["rlvr"].get("provenance") or {}).get("commit", "unknown"),
            "minutes": (time.perf_counter() - started) / 60}


def _interval(stats: dict[str, Any]) -> str:
    m = stats["mean"]
    return f"{m['mean']:.3f}[{m['low']:.2f},{m['high']:.2f}]"


def result_line(result: dict[str, Any]) -> str:
    table, per_row = result["table"], result["per_row"]
    rows = " ".join(f"{name}={_interval(table[name]) if name in table else 'not_run'}" for name in ROWS)

    def zero(name: str) -> str:
        value = (per_row.get(name) or {}).get("zero_variance_fraction")
        return "nan" if value is None else f"{value:.2f}"

    best = result.get("best")
    if best:
        d = table[best]["difference"]
        comparison = (f"best={best} best_minus_rlvr={d['mean']:+.3f}[{d['low']:+.2f},{d['high']:+.2f}] "
                      f"mdd={table[best]['mdd']:.3f} verdict={table[best]['verdict'].replace(' ', '_')}")
    else:
        comparison = "best=none"
    judge = result.get("judge")
    pairwise = "not_run" if not judge else f"{_profile_pairwise(judge['profile'])[0]:.3f}"
    return (f"RESULT env={result['env']} {rows} seeds={result['seeds']} zero_variance_rlvr={zero('rlvr')} "
            f"zero_variance_ruler={zero('ruler_trained' if 'ruler_trained' in per_row else 'ruler_oracle')} "
            f"zero_variance_partial={zero('partial')} {comparison} judge_pairwise={pairwise} "
            f"minutes={result['minutes']:.0f} commit={short_commit(result['commit'])}")


def _profile_pairwise(profile: dict[str, Any]) -> tuple[float, float, float]:
    """Pairwise accuracy over both presentation orders (mean of the two), with the lower low and the higher high."""
    orders = profile["pairwise"].values()
    return (float(np.mean([o["accuracy"] for o in orders])), min(o["low"] for o in orders), max(o["high"] for o in orders))


def write_results(results: dict[str, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "flat_rewards.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    lines = ["# Where pass/fail is flat (`python benchmarks/flat_rewards.py`)", "",
             "Held-out success after the same warm start and the same GRPO budget; mean over seeds with a Student's t 95 % "
             "interval; `- rlvr` is the paired difference (established only with >= 3 seeds and an interval excluding 0). "
             "zero variance = the share of training groups whose members all got one reward.", ""]
    for result in results.values():
        warm, judge = result["warm_start"], result.get("judge")
        lines += [f"## {result['env']} {json.dumps(result['env_kwargs'])} ({result['seeds']} seeds, commit "
                  f"`{short_commit(result['commit'])}`)", "",
                  f"Warm start: held-out {warm['held_out']:.3f} ({warm['rows']} reference rows, {warm['steps']} SFT steps)."
                  + ("" if not judge else " Family judge: pairwise %.3f [%.2f, %.2f] on unseen groups (both orders)."
                     % _profile_pairwise(judge["profile"])), "",
                  "| row | held-out [95 % CI] | - rlvr [95 % CI] | MDD | verdict | zero variance | valid calls | calls / episode | per seed |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name, stats in result["table"].items():
            row = result["per_row"][name]
            d = stats["difference"]
            diff = "(reference)" if d is None else f"{d['mean']:+.3f} [{d['low']:+.2f}, {d['high']:+.2f}]"

            def number(key: str) -> str:
                return "" if row.get(key) is None else f"{row[key]:.2f}"

            mdd = "" if stats["mdd"] is None else f"{stats['mdd']:.3f}"
            lines.append(f"| {name} | {_interval(stats)} | {diff} | {mdd} | "
                         f"{stats['verdict'] or ''} | {number('zero_variance_fraction')} | {number('held_out_valid_call_rate')} | "
                         f"{number('held_out_tool_calls_per_episode')} | "
                         f"{', '.join(f'{x:.3f}' for x in row['held_out_after_per_seed'] or [])} |")
        lines.append("")
    (RESULTS / "flat_rewards.md").write_text("\n".join(lines) + "\n")
    figure, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 3.6), squeeze=False)
    for axis, result in zip(axes[0], results.values()):
        names = list(result["table"])
        means = [result["table"][n]["mean"] for n in names]
        axis.bar(range(len(names)), [m["mean"] for m in means],
                 yerr=[[m["mean"] - m["low"] for m in means], [m["high"] - m["mean"] for m in means]], capsize=4,
                 color=["tab:gray" if n in ("rlvr", "random") else "tab:blue" for n in names])
        axis.axhline(result["warm_start"]["held_out"], color="black", lw=0.8, ls="--", label="warm start")
        axis.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
        axis.set_ylim(0, 1)
        axis.set_title(f"{result['env']} ({result['seeds']} seeds, {result['settings']['steps']} GRPO steps)", fontsize=9)
        axis.set_ylabel("held-out success, 95 % t interval")
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(RESULTS / "flat_rewards.png", dpi=120)
    plt.close(figure)


def recompute_cell(spec: str) -> int:
    """Recompute one stored cell (``env:row:seed``) and compare it with what is stored."""
    from rubricgym.app.bench import recompute_cell_line

    try:
        env_id, row_name, seed_text = spec.rsplit(":", 2)
        seed = int(seed_text)
    except ValueError:
        raise SystemExit(f"--cell takes ENV:ROW:SEED (for example ToolUse-v0:partial:1), got {spec!r}") from None
    stored = json.loads((RESULTS / "flat_rewards.json").read_text()).get(env_id)
    if stored is None:
        raise SystemExit(f"no stored result for {env_id!r} in {RESULTS / 'flat_rewards.json'}")
    rows = {r["name"]: r for r in stored["rows"]}
    if row_name not in rows or seed not in stored["settings"]["seeds"]:
        raise SystemExit(f"{env_id} was measured with rows {sorted(rows)} and seeds {stored['settings']['seeds']}")
    kept = stored["per_row"][row_name]["solved"][stored["settings"]["seeds"].index(seed)]
    print(recompute_cell_line(spec, env_id, rows[row_name], seed, stored["settings"], kept,
                              f"flat_rewards_{env_id.removesuffix('-v0')}", stored["commit"]))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cell:
        return recompute_cell(args.cell)
    path = RESULTS / "flat_rewards.json"
    stored = json.loads(path.read_text()) if path.is_file() else {}
    if args.report_only:
        if not stored:
            raise SystemExit(f"nothing stored at {path}: run python benchmarks/flat_rewards.py first")
        for result in stored.values():
            print(result_line(result))
        return 0
    command = ("python benchmarks/flat_rewards.py " + shlex.join(sys.argv[1:] if argv is None else argv)).strip()
    from rubricgym.app.stages import work_folder

    work_folder(args.work, fresh=args.smoke)  # a smoke run starts from nothing kept
    for env_id in args.envs:
        stored[env_id] = {**measure(env_id, args, command), "command": command}
        write_results(stored)  # each family as it comes out
        print(result_line(stored[env_id]), flush=True)
    for env_id in args.envs:
        print(result_line(stored[env_id]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
