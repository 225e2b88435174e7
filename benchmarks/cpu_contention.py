"""Policy speed on a shared CPU: torch's default threads against one thread and OpenMP's passive
wait policy, each alone and beside one competing CPU-bound process.

Each setting runs in a fresh process (the wait policy must be set before torch is imported):
the default model samples 8 prompts x 32 tokens greedily, five times after three warm-up calls
(``auto`` is now a count fixed at the start: the cores this process may use), and the median is reported. The competitor is a plain busy loop.

    python benchmarks/cpu_contention.py

Ends with ``RESULT <setting>_alone=<s> <setting>_contended=<s> ...`` (seconds per generation).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from rubricgym.app.flags import add_smoke_flag, results_dir

SETTINGS = {
    "default": {"RUBRICGYM_TORCH_THREADS": "fixed"},
    "threads1": {"RUBRICGYM_TORCH_THREADS": "1"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE", "RUBRICGYM_TORCH_THREADS": "fixed"},
    "auto": {"RUBRICGYM_TORCH_THREADS": "auto"},
}
RESULTS = results_dir(__file__)


def worker() -> None:
    import torch

    from rubricgym.agents.policy import Policy, PolicyConfig

    tokens, repeats = int(os.environ.get("BENCH_TOKENS", 32)), int(os.environ.get("BENCH_REPEATS", 5))
    policy = Policy(PolicyConfig(lora_r=0, max_new_tokens=tokens, cpu_threads=os.environ["RUBRICGYM_TORCH_THREADS"]))
    prompts = [[{"role": "user", "content": f"What is {i} + {i + 3}? Explain briefly."}] for i in range(8)]
    for _ in range(min(3, repeats)):  # warm-up (and, for "auto", a first measurement of each thread count)
        policy.sample(prompts, greedy=True)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        policy.sample(prompts, greedy=True)
        times.append(time.perf_counter() - start)
    print(json.dumps({"seconds": statistics.median(times), "threads": torch.get_num_threads()}))


def run(setting: str, contended: bool, timeout_s: float, tokens: int = 32, repeats: int = 5) -> float | None:
    env = {**os.environ, **SETTINGS[setting], "HF_HUB_OFFLINE": "1", "BENCH_TOKENS": str(tokens),
           "BENCH_REPEATS": str(repeats)}
    competitor = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if contended else None
    try:
        done = subprocess.run([sys.executable, __file__, "--worker"], env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError):
        return None
    finally:
        if competitor is not None:
            competitor.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated: " + ", ".join(SETTINGS))
    parser.add_argument("--tokens", type=int, default=32, help="tokens per generation")
    parser.add_argument("--repeats", type=int, default=5, help="timed generations (median) after warm-up")
    add_smoke_flag(parser, settings="auto", tokens=2, repeats=1)
    args = parser.parse_args()
    settings = [s for s in args.settings.split(",") if s]
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        parser.error(f"unknown settings {sorted(unknown)}")
    rows = {}
    for setting in settings:
        for contended in (False, True):
            seconds = run(setting, contended, timeout_s=600, tokens=args.tokens, repeats=args.repeats)
            rows[f"{setting}_{'contended' if contended else 'alone'}"] = seconds
            print(f"{setting:<9} {'with one busy process' if contended else 'alone':<22} "
                  f"{'timed out' if seconds is None else f'{seconds:.2f} s'}", flush=True)
    lines = ["| setting | alone (s) | beside one busy process (s) | ratio |", "| --- | ---: | ---: | ---: |"]
    for setting in settings:
        alone, busy = rows[f"{setting}_alone"], rows[f"{setting}_contended"]
        ratio = f"{busy / alone:.1f}" if alone and busy else "-"
        lines.append(f"| {setting} | {alone or float('nan'):.2f} | {busy or float('nan'):.2f} | {ratio} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cpu_contention.md").write_text(f"Command: `python benchmarks/cpu_contention.py` (8 prompts x {args.tokens} "
                                               f"tokens, greedy, default model, median of {args.repeats} after warm-up "
                                               "calls)\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    print("RESULT " + " ".join(f"{k}={'none' if v is None else f'{v:.2f}'}" for k, v in rows.items()))


if __name__ == "__main__":
    worker() if "--worker" in sys.argv else main()
