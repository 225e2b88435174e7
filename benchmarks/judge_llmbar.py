"""How accurate is a judge? Pairwise accuracy on LLMBar, beside the paper's published evaluators.

Each LLMBar pair (an instruction, two outputs, the gold label) is judged as a RULER group of two
with a generic instruction-following specification, in both presentation orders. Reported per
judge and subset: LLMBar's own metrics (accuracy averaged over the two orders, and the share of
pairs right in both orders) with a 95 % bootstrap interval over pairs, ties, failed calls,
seconds and tokens per pair; the published rows (GPT-4, ChatGPT, LLaMA2, PaLM2, Falcon; Vanilla
and Swap_CoT prompting) from ``llmbar/published_statistics.json``; a seeded random judge as the
chance line. ``oracle:<a>`` is the simulated judge of known accuracy (it reads the gold label):
the instrument's calibration check. Judges: any LiteLLM model string (``--api-base`` for a
local OpenAI-compatible server), ``local`` (in-process default model), ``oracle:<a>``, ``random``.

    python benchmarks/judge_llmbar.py --judges oracle:1.0,oracle:0.7,random --limit 40
    python benchmarks/judge_llmbar.py --judges local --subsets natural --limit 30

Ends with ``RESULT pairs=<n> <judge>:<subset>=<acc> ...``; writes benchmarks/results/judge_llmbar.md
and .png (rows are merged with earlier runs of other judges).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

RESULTS = results_dir(__file__)


def main(argv: list[str] | None = None) -> None:
    from rubricgym.app.llmbar import SUBSETS, judge_pairs, published_rows
    from rubricgym.judges.ruler import RulerConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", default="oracle:1.0,oracle:0.7,random")
    parser.add_argument("--subsets", default=",".join(SUBSETS))
    parser.add_argument("--limit", type=int, default=None, help="pairs per subset (default: all)")
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--scoring", default="sampled", choices=["sampled", "probability", "pointwise"],
                        help="probability: G-Eval expected scores (the in-process judge only); pointwise: each output alone")
    parser.add_argument("--output", default=str(RESULTS / "judge_llmbar"), help="path stem of the .md/.json/.png")
    add_smoke_flag(parser, argv, limit=3, subsets="natural")
    args = parser.parse_args(argv)

    stem = Path(args.output)
    stem.parent.mkdir(parents=True, exist_ok=True)
    store = stem.with_suffix(".json")
    rows = json.loads(store.read_text()) if store.exists() else {}
    summary = []
    pairs = 0
    for judge in args.judges.split(","):
        for subset in args.subsets.split(","):
            verdicts = judge_pairs(judge, subset, args.limit, api_base=args.api_base, config=RulerConfig(scoring=args.scoring),
                                   label=judge + ("+probability" if args.scoring == "probability" else ""))
            low, high = verdicts.interval()
            rows[f"{verdicts.judge}|{subset}"] = {
                "judge": verdicts.judge, "subset": subset, "pairs": verdicts.pairs, "accuracy": verdicts.accuracy,
                "ci": [low, high], "both_correct": verdicts.both_correct, "ties": verdicts.ties,
                "failures": verdicts.failures, "seconds_per_pair": verdicts.seconds / max(1, verdicts.pairs),
                "tokens_per_pair": verdicts.tokens / max(1, verdicts.pairs),
                "command": "python benchmarks/judge_llmbar.py " + " ".join(sys.argv[1:] if argv is None else argv)}
            pairs = max(pairs, verdicts.pairs)
            print(verdicts.line(), flush=True)
            summary.append(f"{verdicts.judge}:{subset}={verdicts.accuracy:.3f}")
    store.write_text(json.dumps(rows, indent=1))
    write_table(rows, stem, published_rows)
    print("RESULT pairs=" + str(pairs) + " " + " ".join(summary))


def write_table(rows: dict, stem: Path, published_rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rubricgym.app.llmbar import SUBSETS

    lines = ["# Judge accuracy on LLMBar (pairwise, both presentation orders)", "",
             "Accuracy = LLMBar's correct_average (mean over the two orders), with a 95 % bootstrap interval over "
             "pairs; both = right in both orders. `oracle:<a>` is simulated (reads the gold label); `random` is the "
             "chance line; published rows are the LLMBar paper's evaluators on the full sets.", "",
             "| judge | subset | pairs | accuracy [95 % CI] | both | ties | failed | s / pair | tokens / pair |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in sorted(rows.values(), key=lambda r: (list(SUBSETS).index(r["subset"]), r["judge"])):
        lines.append(f"| {row['judge']} | {row['subset']} | {row['pairs']} | {row['accuracy']:.3f} "
                     f"[{row['ci'][0]:.2f}, {row['ci'][1]:.2f}] | {row['both_correct']:.3f} | {row['ties']} | "
                     f"{row['failures']} | {row['seconds_per_pair']:.2f} | {row['tokens_per_pair']:.0f} |")
    lines += ["", "Published (LLMBar paper, full sets):", "", "| evaluator | subset | accuracy | both |", "| --- | --- | ---: | ---: |"]
    for subset in SUBSETS:
        for name, stats in published_rows(subset).items():
            lines.append(f"| {name} | {subset} | {stats['accuracy']:.3f} | {stats['both_correct']:.3f} |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")

    subsets = [s for s in SUBSETS if any(r["subset"] == s for r in rows.values())]
    judges = sorted({r["judge"] for r in rows.values()})
    figure, axis = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(judges))
    for k, judge in enumerate(judges):
        xs, ys, errs = [], [], [[], []]
        for i, subset in enumerate(subsets):
            row = rows.get(f"{judge}|{subset}")
            if row:
                xs.append(i + k * width)
                ys.append(row["accuracy"])
                errs[0].append(row["accuracy"] - row["ci"][0])
                errs[1].append(row["ci"][1] - row["accuracy"])
        axis.bar(xs, ys, width, yerr=errs, capsize=3, label=judge + (" (simulated)" if judge.startswith("oracle:") else ""))
    for i, subset in enumerate(subsets):
        for name, stats in published_rows(subset).items():
            if name.endswith("(Vanilla)"):
                axis.plot([i - width / 2, i + 0.8 - width / 2], [stats["accuracy"]] * 2, lw=0.8, color="gray", alpha=0.6)
                axis.text(i + 0.8 - width / 2, stats["accuracy"], name.split(" ")[0], fontsize=6, color="gray", va="center")
    axis.axhline(0.5, color="black", lw=0.8, ls="--")
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(subsets))], subsets)
    axis.set(ylabel="pairwise accuracy", ylim=(0, 1.05), title="Judges on LLMBar (grey: published evaluators, Vanilla)")
    axis.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    figure.savefig(stem.with_suffix(".png"), dpi=120)


if __name__ == "__main__":
    main()
