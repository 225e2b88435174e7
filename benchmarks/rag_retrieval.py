"""Retrieval quality: recall@3 of the supporting article ids.

On the built-in Lumen Books set (answerable questions) and on ../shared/data covid_faq, whose
queries are human paraphrases of the FAQ questions (the harder, lexical-mismatch case).

    python benchmarks/rag_retrieval.py [--retriever bm25|dense] [--k 3]

Ends with ``RESULT recall_at_3=<builtin> covid_faq_recall_at_3=<x> retriever=<name>`` (target >= 0.9 on
the built-in set with bm25s).
"""

from __future__ import annotations

import argparse

import numpy as np

from rubricgym.app.flags import add_smoke_flag
from rubricgym.data import shared_data_dir
from rubricgym.envs.rag import load_support_dataset, make_retriever


def recall_at_k(dataset, retriever, k: int) -> float:
    values = []
    for task in dataset.tasks:
        if task.answerable and task.supporting_ids:
            found = {article.id for article, _ in retriever.search(task.question, k)}
            values.append(len(found & set(task.supporting_ids)) / len(set(task.supporting_ids)))
    return float(np.mean(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retriever", default="bm25")
    parser.add_argument("--k", type=int, default=3)
    add_smoke_flag(parser)  # already seconds: the smoke run is the real one
    args = parser.parse_args()
    results = {}
    names = ["builtin"] + (["covid_faq"] if shared_data_dir() is not None else [])
    for name in names:
        dataset = load_support_dataset(name)
        retriever = make_retriever(args.retriever, dataset.articles)
        results[name] = recall_at_k(dataset, retriever, args.k)
        print(f"{name}: {len(dataset.articles)} articles, recall@{args.k} = {results[name]:.3f}")
    covid = f" covid_faq_recall_at_{args.k}={results['covid_faq']:.3f}" if "covid_faq" in results else ""
    print(f"RESULT recall_at_{args.k}={results['builtin']:.3f}{covid} retriever={args.retriever}")


if __name__ == "__main__":
    main()
