"""The headline claims, re-measured: >= 5 seeds each, paired by seed, the random control beside them.

Each claim is a paired difference over seeds, ``treatment - comparator``, per seed the held-out
mean on the same tasks, with a Student's t 95 % interval over seeds, P(improvement) and the
minimum detectable difference at 80 % power from the measured spread of the paired differences
(rubricgym.app.stats.seed_table). A claim is established only with >= 3 seeds and an interval
that excludes 0 (``verdict=better|worse``); otherwise ``verdict=not_established``.

* ``order_correction_kept``: ``order_0.7_corrected - order_0.7``: RULER alone as the reward from a
  simulated judge that follows the presentation order with probability 0.7, read with and without
  the correction its calibrated profile calls for (``--judge-correction``); ``share`` = the part
  of the uncorrected run's gap to RLVR that the correction closes.
* ``asym_correction_kept``: the same for a judge with false-positive rate 0.3 and false-negative
  rate 0.05 (``fpfn_0.3_0.05``).
* ``ruler_trained_gain_kept``: ``ruler_trained - rlvr``: RULER alone from the pointwise judge trained
  by ``rubricgym train-judge --method sft --pointwise`` (``--judge-checkpoint``, else trained here
  first, ``--judge-epochs`` passes, kept in ``--work``); ``share`` = its gain over the untrained
  weights as a part of RLVR's.
* ``rlcer_full_minus_coldstart``: ``rlcer+coldstart+trained_verifier - rlvr+coldstart`` (run by
  ``benchmarks/rlcer.py``, which trains the cold start and the verifier first): does anything
  beyond the cold start help? Give it a level where the comparator is off the ceiling
  (``--rlcer-args "--level 2"``): at rlcer.py's default level 1, RLVR from the cold start solved 46
  of 48 held-out tasks (seed 0), so no recipe could beat it by more than 0.04.

Every claim's bench adds ``rlvr`` and the ``random`` control (Bernoulli(0.5) per completion). The
first three share one setting (the built-in sums at ``--level``, ``--steps`` GRPO steps, the same
``--eval-tasks`` held-out tasks); each cell (one row, one seed) is kept under ``results/.cells``
with its provenance (commit, config hash, packages) and reused only when all three match, so an
interrupted run resumes and a run made by other code is never mixed in.

    python benchmarks/claims.py                                   # every claim, 5 seeds
    python benchmarks/claims.py --claims order_correction_kept    # one claim
    python benchmarks/claims.py --report-only                     # reprint the stored RESULT lines (and their commit)
    python benchmarks/claims.py --cell order_correction_kept:order_0.7_corrected:3   # recompute one cell, compare
    python benchmarks/claims.py --smoke                           # the tiny random model, 1 step (the plumbing)

Ends with one ``RESULT <claim>=<d>[<lo>,<hi>] seeds=<n> mdd=<m> p_improvement=<p> verdict=<v>
share=<s> commit=<c>`` line per claim; writes ``claims.json``, ``claims.md`` and ``claims.png``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.bench import short_commit  # noqa: E402
from rubricgym.app.flags import add_smoke_flag, doc_parser, results_dir  # noqa: E402

RESULTS = results_dir(__file__)
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Claim:
    """One claim: ``treatment - comparator``, paired by seed."""

    treatment: str
    comparator: str
    share_of: str
    """``gap``: the share of the comparator's gap to rlvr that the treatment closes; ``gain``: the
    treatment's gain over the untrained weights as a part of the comparator's; ``""``: none."""
    question: str


CLAIMS = {
    "order_correction_kept": Claim("order_0.7_corrected", "order_0.7", "gap",
                                   "does the correction win back an order-following judge's loss?"),
    "asym_correction_kept": Claim("fpfn_0.3_0.05_corrected", "fpfn_0.3_0.05", "gap",
                                  "does the correction win back an asymmetric (false-positive-heavy) judge's loss?"),
    "ruler_trained_gain_kept": Claim("ruler_trained", "rlvr", "gain",
                                     "does RULER with the trained judge keep the verifier's gain?"),
    "rlcer_full_minus_coldstart": Claim("rlcer+coldstart+trained_verifier", "rlvr+coldstart", "",
                                        "does RLCER's full recipe beat RLVR from the same cold start?"),
}
CONTROL = "random"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = doc_parser(__doc__)
    parser.add_argument("--claims", default=",".join(CLAIMS), help="comma-separated claims to measure (default: all)")
    parser.add_argument("--seeds", type=int, default=5, help="training seeds per row (seeds 0..n-1; >= 5 for a headline)")
    parser.add_argument("--steps", type=int, default=8, help="GRPO steps per run")
    parser.add_argument("--level", type=int, default=1, help="difficulty level of the built-in sums (train and held-out)")
    parser.add_argument("--eval-tasks", type=int, default=64, help="held-out tasks per run (the same for every run)")
    parser.add_argument("--model", default=None, help="policy base model (default: the default model)")
    parser.add_argument("--workers", type=int, default=1, help="processes for the cells (Ray; $RAY_ADDRESS for a cluster)")
    parser.add_argument("--cell-threads", type=int, default=2, help="torch threads per cell (fixed: it is in the provenance)")
    parser.add_argument("--calibration-groups", type=int, default=0, help="held-out math groups a judge profile reads (0: all)")
    parser.add_argument("--judge-checkpoint", default="", help="trained judge for ruler_trained (default: train one first)")
    parser.add_argument("--judge-epochs", type=float, default=3.0, help="SFT passes when the judge is trained here")
    parser.add_argument("--rlcer-args", default="", help="extra arguments for benchmarks/rlcer.py (its cold start and verifier)")
    parser.add_argument("--work", default="/tmp/rubricgym-claims", help="checkpoints of the trained judge (a finished stage is kept)")
    parser.add_argument("--report-only", action="store_true", help="reprint the RESULT lines from claims.json, recomputing nothing")
    parser.add_argument("--cell", default="", metavar="CLAIM:ROW:SEED",
                        help="recompute one stored cell and compare its held-out results with the stored ones")
    add_smoke_flag(parser, argv, claims="order_correction_kept", seeds=2, steps=1, eval_tasks=2, model="tiny",
                   cell_threads=1, work="/tmp/rubricgym-claims-smoke")
    args = parser.parse_args(argv)
    args.claims = [c.strip() for c in args.claims.split(",") if c.strip()]
    unknown = [c for c in args.claims if c not in CLAIMS]
    if unknown:
        parser.error(f"unknown claims {unknown}: choose from {', '.join(CLAIMS)}")
    if args.model == "tiny":
        from rubricgym.testing.tiny import tiny_model_dir

        args.model = str(tiny_model_dir())
    return args


# -- rows --------------------------------------------------------------------------------------


def profile_path(judge: str, groups: int) -> str:
    """A calibrated profile of the simulated ``judge`` (``rubricgym judge-eval --calibrate``), written
    under a name that holds its content's hash: a row's knobs (and so its provenance) change with it."""
    from rubricgym.app.calibration import judge_profile

    text = json.dumps(judge_profile(judge, groups="math", limit=groups, progress=False), indent=1, sort_keys=True)
    folder = RESULTS / "claims_profiles"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{judge.removeprefix('oracle:').replace('=', '').replace(',', '_')}-{hashlib.sha256(text.encode()).hexdigest()[:10]}.json"
    if not path.is_file():  # the name hashes the profile alone; the file also says where it came from
        from rubricgym.app.provenance import provenance

        where = provenance({"judge": judge, "groups": "math", "limit": groups})
        path.write_text(json.dumps({**json.loads(text), "provenance": where}, indent=1, sort_keys=True))
    return os.path.relpath(path, HERE.parent) if path.is_relative_to(HERE.parent) else str(path)


def trained_judge(args: argparse.Namespace) -> str:
    """The pointwise judge for ``ruler_trained``: ``--judge-checkpoint``, else trained here (kept in ``--work``)."""
    if args.judge_checkpoint:
        return args.judge_checkpoint
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.sft import SFTConfig
    from rubricgym.app.judge_training import JudgeTrainingConfig, train_judge
    from rubricgym.app.stages import stage

    folder = Path(args.work) / f"judge-sft-{args.judge_epochs:g}"
    print(f"training the pointwise judge ({args.judge_epochs:g} SFT passes) in {folder}", flush=True)
    done = stage(folder, lambda: train_judge(JudgeTrainingConfig(
        method="sft", sft=SFTConfig(epochs=args.judge_epochs), pointwise=True, output_dir=str(folder),
        policy=PolicyConfig(model=args.model, max_new_tokens=96, temperature=1.0), eval_every=18, max_eval_groups=8)))
    return done["checkpoint"]


def bench_row(name: str, args: argparse.Namespace):
    """The bench row of ``name`` (rlvr, random, flip_/fpfn_/order_ rows as in judge_noise.py, ruler_trained)."""
    from judge_noise import CORRECTED, judge_of  # this folder is on sys.path

    from rubricgym.app.bench import BenchRow
    from rubricgym.registration import CORRECTION_KNOB

    if name == "rlvr":
        return BenchRow("rlvr", "Math-v0")
    if name == CONTROL:
        return BenchRow(CONTROL, "MathRandom-v0")
    if name == "ruler_trained":
        return BenchRow(name, "MathRuler-v0", {"judge": f"local:{trained_judge(args)}", "combine": "replace", "scoring": "pointwise"})
    judge = judge_of(name)
    knobs = {"judge": judge, "combine": "replace"}
    if name.endswith(CORRECTED):
        knobs[CORRECTION_KNOB] = profile_path(judge, args.calibration_groups)
    return BenchRow(name, "MathRuler-v0", knobs)


def bench_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The BenchConfig of the judged claims, as JSON (stored, so one cell can be recomputed exactly)."""
    settings = dict(envs=["Math-v0"], env_kwargs={"levels": [args.level]}, steps=args.steps, seeds=list(range(args.seeds)),
                    eval_tasks=args.eval_tasks, model=args.model, workers=args.workers, cell_threads=args.cell_threads,
                    judge="oracle:1.0", output_dir=str(RESULTS))  # every judged row names its own judge
    if args.smoke:
        settings.update(group_size=2, groups_per_step=1, max_new_tokens=8, resamples=200)
    return settings


def row_json(row) -> dict[str, Any]:
    return {"name": row.name, "env": row.env_id, "knobs": row.knobs, "adapter": row.adapter}


# -- measuring ---------------------------------------------------------------------------------


def measure(claim_name: str, args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Run (or reuse the kept cells of) one claim's bench; its rows as the bench wrote them."""
    claim = CLAIMS[claim_name]
    stem = f"claims_{claim_name}"
    if claim_name == "rlcer_full_minus_coldstart":
        seeds = ",".join(str(s) for s in range(args.seeds))
        call = [sys.executable, str(HERE / "rlcer.py"), "--rows", f"{claim.comparator},{CONTROL},{claim.treatment}",
                "--seeds", seeds, "--results-name", stem, *shlex.split(args.rlcer_args), *(["--smoke"] if args.smoke else [])]
        print("running " + shlex.join(call[1:]), flush=True)
        subprocess.run(call, check=True, env={**os.environ, "RUBRICGYM_RESULTS_DIR": str(RESULTS)})
        stored = json.loads((RESULTS / f"{stem}.json").read_text())
        rows = [{"name": r["scheme"], "env": r["env"], "knobs": r["knobs"], "adapter": r.get("adapter")} for r in stored["rows"]]
        settings = {k: v for k, v in stored["config"].items() if k not in ("rows", "reuse", "results_name", "command")}
        return {"settings": settings, "rows": rows, "bench": stored["rows"]}
    from rubricgym.app.bench import bench_config_from_json, run_bench

    names = list(dict.fromkeys(["rlvr", CONTROL, claim.comparator, claim.treatment]))
    rows = [row_json(bench_row(name, args)) for name in names]
    settings = bench_settings(args)
    done = run_bench(bench_config_from_json(settings, rows, stem, command))
    return {"settings": settings, "rows": rows, "bench": done}


def claim_result(claim_name: str, measured: dict[str, Any]) -> dict[str, Any]:
    """The claim's statistics from its bench rows (every row: seeds x tasks, paired by seed)."""
    import numpy as np

    from rubricgym.app.stats import seed_table

    claim = CLAIMS[claim_name]
    by_name = {r["scheme"]: r for r in measured["bench"]}
    solved = {name: by_name[name]["solved"] for name in (claim.treatment, claim.comparator)}
    stats = seed_table(solved, reference=claim.comparator)[claim.treatment]
    means = {name: float(np.mean(row["solved"])) for name, row in by_name.items()}
    before = float(np.mean(by_name[claim.comparator]["before_solved"]))
    share = None
    if claim.share_of == "gap" and "rlvr" in means:
        gap = means["rlvr"] - means[claim.comparator]
        share = (means[claim.treatment] - means[claim.comparator]) / gap if gap > 0 else None
    elif claim.share_of == "gain":
        gain = means[claim.comparator] - before
        share = (means[claim.treatment] - before) / gain if gain > 0 else None
    control = seed_table({"rlvr" if "rlvr" in by_name else claim.comparator: by_name.get("rlvr", by_name[claim.comparator])["solved"],
                          CONTROL: by_name[CONTROL]["solved"]}, reference="rlvr" if "rlvr" in by_name else claim.comparator)
    commit = (by_name[claim.treatment].get("provenance") or {}).get("commit", "unknown")
    return {"claim": claim_name, "question": claim.question, "treatment": claim.treatment, "comparator": claim.comparator,
            **stats.as_dict(), "share": share, "share_of": claim.share_of, "before": before, "means": means,
            "per_seed": {name: [float(np.mean(s)) for s in row["solved"]] for name, row in by_name.items()},
            "control_difference": control[CONTROL].as_dict()["difference"], "commit": commit,
            "reused_rows": [r["scheme"] for r in measured["bench"] if r.get("reused")],
            "settings": measured["settings"], "rows": measured["rows"]}


def result_line(result: dict[str, Any]) -> str:
    d = result["difference"]
    share = "nan" if result["share"] is None else f"{result['share']:.2f}"
    return (f"RESULT {result['claim']}={d['mean']:+.3f}[{d['low']:+.2f},{d['high']:+.2f}] seeds={result['seeds']} "
            f"mdd={result['mdd']:.3f} p_improvement={result['p_improvement']:.2f} verdict={result['verdict'].replace(' ', '_')} "
            f"share={share} commit={short_commit(result['commit'])}")


def write_results(results: dict[str, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "claims.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    lines = ["# The headline claims, re-measured (`python benchmarks/claims.py`)", "",
             "Each claim is a paired difference over seeds (treatment - comparator, per seed the held-out mean on the same "
             "tasks), Student's t 95 % interval over seeds; MDD = the smallest true difference this many seeds detect at "
             "80 % power from the measured spread; established only with >= 3 seeds and an interval that excludes 0. "
             "`random - rlvr` is the control: a reward that carries no information.", "",
             "| claim | question | difference [95 % CI] | seeds | MDD | P(improvement) | verdict | share | random - rlvr | commit |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results.values():
        d, c = r["difference"], r["control_difference"]
        share = "" if r["share"] is None else f"{r['share']:.2f} of the {r['share_of']}"
        lines.append(f"| {r['claim']} | {r['question']} | {d['mean']:+.3f} [{d['low']:+.2f}, {d['high']:+.2f}] | {r['seeds']} | "
                     f"{r['mdd']:.3f} | {r['p_improvement']:.2f} | {r['verdict']} | {share} | "
                     f"{c['mean']:+.3f} [{c['low']:+.2f}, {c['high']:+.2f}] | `{short_commit(r['commit'])}` |")
    lines += ["", "Per seed (held-out mean):", ""]
    for r in results.values():
        lines.append(f"- {r['claim']}: " + "; ".join(f"{name} {', '.join(f'{x:.3f}' for x in values)}"
                                                     for name, values in r["per_seed"].items())
                     + f" (untrained {r['before']:.3f}; settings {json.dumps({k: v for k, v in r['settings'].items() if k not in ('output_dir',)})})")
    (RESULTS / "claims.md").write_text("\n".join(lines) + "\n")
    figure, axis = plt.subplots(figsize=(7, 0.9 + 0.7 * len(results)))
    for y, r in enumerate(results.values()):
        d = r["difference"]
        axis.errorbar(d["mean"], y, xerr=[[d["mean"] - d["low"]], [d["high"] - d["mean"]]], fmt="o", capsize=4,
                      color="tab:green" if r["verdict"] == "better" else "tab:red" if r["verdict"] == "worse" else "tab:gray")
    axis.axvline(0, color="black", lw=0.8)
    axis.set_yticks(range(len(results)), [f"{r['claim']}\n({r['seeds']} seeds)" for r in results.values()], fontsize=8)
    axis.set_xlabel("paired difference in held-out accuracy, 95 % t interval over seeds")
    figure.tight_layout()
    figure.savefig(RESULTS / "claims.png", dpi=120)
    plt.close(figure)


def recompute_cell(spec: str) -> int:
    """Recompute one stored cell (``claim:row:seed``) and compare it with what is stored."""
    from rubricgym.app.bench import recompute_cell_line

    try:
        claim_name, row_name, seed_text = spec.rsplit(":", 2)
        seed = int(seed_text)
    except ValueError:
        raise SystemExit(f"--cell takes CLAIM:ROW:SEED (for example order_correction_kept:rlvr:0), got {spec!r}") from None
    stored = json.loads((RESULTS / "claims.json").read_text()).get(claim_name)
    if stored is None:
        raise SystemExit(f"no stored result for claim {claim_name!r} in {RESULTS / 'claims.json'}")
    rows = {r["name"]: r for r in stored["rows"]}
    if row_name not in rows:
        raise SystemExit(f"claim {claim_name} has rows {sorted(rows)}, not {row_name!r}")
    settings = stored["settings"]
    if seed not in settings["seeds"]:
        raise SystemExit(f"claim {claim_name} was measured with seeds {settings['seeds']}, not {seed}")
    bench = json.loads((RESULTS / f"claims_{claim_name}.json").read_text())
    kept = next(r for r in bench["rows"] if r["scheme"] == row_name)["solved"][settings["seeds"].index(seed)]
    print(recompute_cell_line(spec, settings["envs"][0], rows[row_name], seed, settings, kept, f"claims_{claim_name}",
                              stored["commit"]))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cell:
        return recompute_cell(args.cell)
    path = RESULTS / "claims.json"
    stored = json.loads(path.read_text()) if path.is_file() else {}
    if args.report_only:
        if not stored:
            raise SystemExit(f"nothing stored at {path}: run python benchmarks/claims.py first")
        for result in stored.values():
            print(result_line(result))
        return 0
    command = ("python benchmarks/claims.py " + shlex.join(sys.argv[1:] if argv is None else argv)).strip()
    started = time.perf_counter()
    for claim_name in args.claims:
        stored[claim_name] = claim_result(claim_name, measure(claim_name, args, command))
        stored[claim_name]["command"] = command
        write_results(stored)  # each claim as it comes out
        print(result_line(stored[claim_name]), f"({(time.perf_counter() - started) / 60:.1f} min so far)", flush=True)
    print(f"claims: {', '.join(args.claims)} in {(time.perf_counter() - started) / 60:.1f} min")
    for claim_name in args.claims:
        print(result_line(stored[claim_name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
