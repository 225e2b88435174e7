"""Same command, same seed, same results: idle, beside busy processes, and fanned out.

Runs ``rubricgym train`` three times with one seed (a fresh process each): twice on an idle
machine and once beside two busy processes this script starts itself (each a plain CPU-bound
loop, one per core here), and compares every metric except timings, and the adapter's bytes.
Then runs one small ``rubricgym bench`` grid (rlvr and the random control, two seeds) in one
process and with ``--workers 2`` (Ray) and compares every cell's held-out results and training
rewards:

    python benchmarks/determinism.py                  # the default model, 3 steps, 16 held-out tasks
    python benchmarks/determinism.py --smoke          # the tiny random model, 1 step (seconds)

Ends with ``RESULT identical_idle=<0|1> identical_loaded=<0|1> identical_workers=<0|1> loaded_slowdown=<x> ...`` and
writes ``determinism.json`` (with the commit and config) to ``benchmarks/results``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rubricgym.app.flags import add_smoke_flag, results_dir
from rubricgym.app.provenance import provenance

RESULTS = results_dir(__file__)
TIMING = ("seconds", "minutes", "time", "_s")


def is_timing(key: str) -> bool:
    return any(part in key for part in TIMING) or key in ("rollouts_prefetched", "rollout_staleness")


def run_once(args: argparse.Namespace, folder: Path) -> tuple[list[dict], str, float]:
    """One ``rubricgym train`` in a fresh process: its metrics without timings, the adapter's hash, wall seconds."""
    command = [sys.executable, "-m", "rubricgym", "train", "--env", args.env, "--steps", str(args.steps),
               "--eval-tasks", str(args.eval_tasks), "--seed", str(args.seed), "--output-dir", str(folder),
               "--report-to", "none", "--checkpoint-every", str(args.steps), *(["--model", args.model] if args.model else [])]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    metrics = [{k: v for k, v in row.items() if not is_timing(k)} for row in rows]
    adapters = sorted(folder.glob("checkpoint-*/adapter/*.safetensors"))
    if not adapters:
        raise RuntimeError(f"no adapter was saved under {folder}")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in adapters)).hexdigest()
    return metrics, digest, seconds


def bench_cells(args: argparse.Namespace, folder: Path, workers: int) -> list[dict]:
    """A small bench grid in a fresh process: per row its per-seed held-out results and training reward."""
    command = [sys.executable, "-m", "rubricgym", "bench", "--envs", args.env, "--schemes", "rlvr,random", "--steps", "1",
               "--seeds", "0,1", "--eval-tasks", str(args.eval_tasks), "--group-size", "2", "--groups-per-step", "2",
               "--judge", "oracle:1.0", "--output-dir", str(folder), "--results-name", "grid", "--workers", str(workers),
               *(["--model", args.model] if args.model else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    rows = json.loads((folder / "grid.json").read_text())["rows"]
    return [{"scheme": r["scheme"], "solved": r["solved"], "mean_train_reward": r["mean_train_reward"]} for r in rows]


def first_difference(a: list[dict], b: list[dict]) -> str:
    for step, (x, y) in enumerate(zip(a, b)):
        for key in sorted(set(x) | set(y)):
            if x.get(key) != y.get(key):
                return f"row {step} {key}: {x.get(key)!r} vs {y.get(key)!r}"
    return "" if len(a) == len(b) else f"{len(a)} rows vs {len(b)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Math-v0")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--eval-tasks", type=int, default=16)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--model", default="", help="base model (default: the default model; --smoke: the tiny random one)")
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside the loaded run")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    add_smoke_flag(parser, argv, steps=1, eval_tasks=2, model="tiny", busy=1)
    args = parser.parse_args(argv)
    if args.model == "tiny":
        from rubricgym.testing.tiny import tiny_model_dir

        args.model = str(tiny_model_dir())
    with tempfile.TemporaryDirectory() as scratch:
        runs = {}
        for name in ("idle_a", "idle_b"):
            runs[name] = run_once(args, Path(scratch) / name)
            print(f"{name}: adapter {runs[name][1][:12]}, {runs[name][2]:.0f} s", flush=True)
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            runs["loaded"] = run_once(args, Path(scratch) / "loaded")
        finally:
            for process in busy:
                process.kill()
        print(f"loaded: adapter {runs['loaded'][1][:12]}, {runs['loaded'][2]:.0f} s", flush=True)
        grids = {workers: bench_cells(args, Path(scratch) / f"bench{workers}", workers) for workers in (1, 2)}
        print(f"bench grid: {grids[1]}", flush=True)
    reference = runs["idle_a"]
    identical = {name: int(run[0] == reference[0] and run[1] == reference[1]) for name, run in runs.items() if name != "idle_a"}
    differences = {name: first_difference(reference[0], run[0]) or ("adapter bytes differ" if run[1] != reference[1] else "")
                   for name, run in runs.items() if name != "idle_a"}
    identical["workers"] = int(grids[1] == grids[2])
    differences["workers"] = first_difference(grids[1], grids[2])
    slowdown = runs["loaded"][2] / max(reference[2], 1e-9)
    config = {k: v for k, v in vars(args).items() if k != "timeout"}
    result = {"identical_idle": identical["idle_b"], "identical_loaded": identical["loaded"],
              "identical_workers": identical["workers"], "loaded_slowdown": round(slowdown, 2), "bench_grid": grids[1],
              "seconds": {name: round(run[2], 1) for name, run in runs.items()}, "differences": differences,
              "adapter_sha256": {name: run[1] for name, run in runs.items()}, "config": config,
              "provenance": provenance(config), "commit": provenance(config)["commit"]}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"determinism{'_smoke' if args.smoke else ''}.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, text in differences.items():
        if text:
            print(f"{name} differs from idle_a: {text}")
    print(f"RESULT identical_idle={identical['idle_b']} identical_loaded={identical['loaded']} identical_workers={identical['workers']} "
          f"loaded_slowdown={slowdown:.2f} busy={args.busy} steps={args.steps} seed={args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
