"""RAG customer-support environments: built-in Lumen Books knowledge base, public-set loaders,
BM25 / dense retrieval, independent reward components."""

from .env import RagSupportConfig, RagSupportEnv
from .kb import Article, RagTask, SupportDataset, load_support_dataset
from .retrieval import BM25Retriever, DenseRetriever, make_retriever
from .rewards import citation_score, grounded_score, refusal_score, token_f1, unsupported_facts

__all__ = ["Article", "BM25Retriever", "DenseRetriever", "RagSupportConfig", "RagSupportEnv", "RagTask", "SupportDataset",
           "citation_score", "grounded_score", "load_support_dataset", "make_retriever", "refusal_score", "token_f1",
           "unsupported_facts"]
