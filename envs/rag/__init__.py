"""RAG customer-support environments: built-in Lumen Books knowledge base, public-set loaders,
BM25 / dense retrieval, independent reward components."""

from rubricgym.data import register_dataset
from rubricgym.registration import register_family

from .env import RagSupportConfig, RagSupportEnv
from .kb import LICENCES, PUBLIC_FILES, Article, RagTask, SupportDataset, load_support_dataset
from .retrieval import BM25Retriever, DenseRetriever, make_retriever
from .rewards import citation_score, grounded_score, refusal_score, token_f1, unsupported_facts



def register() -> None:
    """The RAG family's ids; ``RagSupportRuler-v0``: reward = 0.5 x components + 0.5 x RULER score."""
    for name, shared_file in PUBLIC_FILES.items():
        register_dataset(name, shared_file, licence=LICENCES[name])
    register_family("RagSupport", RagSupportEnv, ruler={"combine": {"env": 0.5, "ruler": 0.5}})


__all__ = ["register", "Article", "BM25Retriever", "DenseRetriever", "RagSupportConfig", "RagSupportEnv", "RagTask", "SupportDataset",
           "citation_score", "grounded_score", "load_support_dataset", "make_retriever", "refusal_score", "token_f1",
           "unsupported_facts"]
