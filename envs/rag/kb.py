"""Knowledge bases and question sets for the RAG support environments.

Built in: Lumen Books, a fictional online bookshop written for this project (44 policy
articles on refunds, shipping, accounts, billing, gift cards, warranties, privacy and support;
152 questions with reference answers and supporting article ids, 22 of them unanswerable and
20 that need several articles or have conditions). Loaders turn the public sets in
``../shared/data`` (``covid_faq``, ``xquad_en``, ``mtrag_un``) or a JSON/JSONL file into the same
shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricgym.data import DatasetLoadError, load_records, read_file

#: the public RAG sets ``dataset=`` names, read from ../shared/data
PUBLIC_FILES = {"covid_faq": "covid_faq/faq_queries.jsonl", "covid_faq_corpus": "covid_faq/faq_corpus.jsonl",
                "xquad_en": "xquad_en/xquad_en.jsonl", "mtrag_un": "mtrag_un/mtrag_un_reference.jsonl"}
#: their licences (../shared/data/README.md); these are joins of several upstream files, so
#: ``rubricgym data fetch`` does not rebuild them: read them from ../shared/data
LICENCES = {"covid_faq": "Apache-2.0 (deepset-ai/COVID-QA); FAQ text from public-health websites",
            "covid_faq_corpus": "Apache-2.0 (deepset-ai/COVID-QA); FAQ text from public-health websites",
            "xquad_en": "CC BY-SA 4.0 (google-deepmind/xquad; share-alike applies to derived data)",
            "mtrag_un": "Apache-2.0 (IBM/mt-rag-benchmark); passages keep their corpora's terms"}

BUILTIN = Path(__file__).resolve().parent / "data" / "lumen_kb.json"


@dataclass(frozen=True)
class Article:
    id: str
    text: str
    title: str = ""

    def render(self) -> str:
        return f"[{self.id}] {self.title + ': ' if self.title else ''}{self.text}"


@dataclass(frozen=True)
class RagTask:
    id: str
    question: str
    answer: str
    supporting_ids: tuple[str, ...]
    answerable: bool = True
    history: tuple[dict[str, str], ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass
class SupportDataset:
    name: str
    articles: list[Article]
    tasks: list[RagTask]
    company: str = "Lumen Books"
    contact: str = "help@lumenbooks.example"


def builtin_dataset() -> SupportDataset:
    data = json.loads(BUILTIN.read_text())
    articles = [Article(a["id"], a["text"], a["title"]) for a in data["articles"]]
    tasks = [RagTask(q["id"], q["question"], q["answer"], tuple(q["supporting_ids"]), q["answerable"],
                     metadata={"kind": q["kind"]}) for q in data["questions"]]
    return SupportDataset("builtin", articles, tasks, data["company"])


def covid_faq() -> SupportDataset:
    corpus = load_records("covid_faq_corpus")
    queries = load_records("covid_faq")
    articles = [Article(r["id"], r["answer"], r["question"]) for r in corpus]
    tasks = [RagTask(r["id"], r["question"], r["answer"], (r["gold_faq_id"],), True,
                     metadata={"paraphrase_of": r.get("gold_faq_question")}) for r in queries]
    return SupportDataset("covid_faq", articles, tasks, company="a public-health information service", contact="your local health authority")


def xquad_en() -> SupportDataset:
    rows = load_records("xquad_en")
    ids: dict[str, str] = {}
    articles = []
    tasks = []
    for r in rows:
        context = r["contexts"][0]
        if context not in ids:
            ids[context] = f"P{len(ids):04d}"
            articles.append(Article(ids[context], context, r.get("title", "")))
        tasks.append(RagTask(r["id"], r["question"], r["answer"], (ids[context],), True))
    return SupportDataset("xquad_en", articles, tasks, company="an encyclopedia help desk", contact="the editors")


def mtrag_un() -> SupportDataset:
    rows = load_records("mtrag_un")
    seen: dict[str, Article] = {}
    tasks = []
    for r in rows:
        for cid, text in zip(r.get("context_ids") or [], r.get("contexts") or []):
            seen.setdefault(str(cid), Article(str(cid), text.strip()))
        history = tuple({"role": h.get("speaker", h.get("role", "user")) if isinstance(h, dict) else "user",
                         "content": h.get("text", h.get("content", "")) if isinstance(h, dict) else str(h)}
                        for h in (r.get("history") or []))
        answerable = r.get("answerability") in ("ANSWERABLE", "PARTIAL")
        tasks.append(RagTask(r["id"], r["question"], r["answer"], tuple(str(c) for c in r.get("context_ids") or []),
                             answerable, history=history, metadata={"collection": r.get("collection")}))
    return SupportDataset("mtrag_un", list(seen.values()), tasks, company="a documentation help desk", contact="the support team")


def from_file(path: str | Path) -> SupportDataset:
    """A JSON file shaped like the built-in one: ``{"articles": [...], "questions": [...]}``."""
    shape = ("expected a JSON object with 'articles' (id, text, title) and 'questions' "
             "(id, question, answer, supporting_ids, answerable)")
    try:
        data = json.loads(Path(path).read_text()) if str(path).endswith(".json") else None
        if not isinstance(data, dict) or "articles" not in data or "questions" not in data:
            raise DatasetLoadError(f"dataset {path}: {shape}")
        articles = [Article(str(a["id"]), a["text"], a.get("title", "")) for a in data["articles"]]
        tasks = [RagTask(str(q["id"]), q["question"], q["answer"], tuple(q.get("supporting_ids", [])), q.get("answerable", True))
                 for q in data["questions"]]
    except DatasetLoadError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:  # unreadable, not JSON, rows of another shape
        raise DatasetLoadError(f"dataset {path}: {type(error).__name__}: {error!s:.200}; {shape}") from None
    return SupportDataset(Path(path).stem, articles, tasks, data.get("company", "the company"))


LOADERS = {"builtin": builtin_dataset, "covid_faq": covid_faq, "xquad_en": xquad_en, "mtrag_un": mtrag_un}


def load_support_dataset(name: str | SupportDataset) -> SupportDataset:
    if isinstance(name, SupportDataset):
        return name
    if name in LOADERS:
        return LOADERS[name]()
    if Path(str(name)).is_file():
        return from_file(name)
    raise DatasetLoadError(f"unknown RAG dataset {name!r}: use one of {sorted(LOADERS)} or a .json path")


__all__ = ["Article", "RagTask", "SupportDataset", "load_support_dataset", "read_file"]
