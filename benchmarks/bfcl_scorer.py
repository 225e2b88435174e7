"""The BFCL AST scorer against BFCL's own ground truth, and against wrong calls.

On every ../shared/data/bfcl_v4 file with ground truth: the ground-truth calls (first acceptable
value of each argument) must score correct; four mutations of them must score incorrect:
another function name, a changed argument value, a missing required argument, an extra call.

    python benchmarks/bfcl_scorer.py [--limit N] [--smoke]

Ends with ``RESULT truth_accepted=<a> mutations_rejected=<b>`` (targets 1.0 and >= 0.99).
"""

from __future__ import annotations

import argparse
from collections import Counter

from rubricgym.app.flags import add_smoke_flag
from rubricgym.data import load_records, shared_data_dir
from rubricgym.envs.tools.bfcl import check_calls, mutations, truth_calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="rows per file (default: all)")
    add_smoke_flag(parser, limit=5)
    args = parser.parse_args()
    folder = shared_data_dir()
    if folder is None:
        raise SystemExit("../shared/data is not beside this checkout (set RUBRICGYM_DATA_DIR)")
    truth_total = truth_ok = 0
    mutation_total = mutation_rejected = 0
    per_kind: Counter = Counter()
    per_kind_rejected: Counter = Counter()
    for path in sorted((folder / "bfcl_v4").glob("*.jsonl")):
        rows = [r for r in load_records(path) if r.get("ground_truth")][: args.limit]
        ok = 0
        for row in rows:
            calls = truth_calls(row["ground_truth"])
            ok += check_calls(calls, row["ground_truth"], row["function"])[0]
            for kind, mutated in mutations(calls, row["function"], row["ground_truth"]).items():
                rejected = not check_calls(mutated, row["ground_truth"], row["function"])[0]
                per_kind[kind] += 1
                per_kind_rejected[kind] += rejected
        truth_total += len(rows)
        truth_ok += ok
        if rows:
            print(f"{path.name:<26} rows {len(rows):4d}  truth accepted {ok}/{len(rows)}")
    for kind in sorted(per_kind):
        print(f"mutation {kind:<18} rejected {per_kind_rejected[kind]}/{per_kind[kind]}")
    mutation_total, mutation_rejected = sum(per_kind.values()), sum(per_kind_rejected.values())
    print(f"RESULT truth_accepted={truth_ok / truth_total:.4f} mutations_rejected={mutation_rejected / mutation_total:.4f}")


if __name__ == "__main__":
    main()
