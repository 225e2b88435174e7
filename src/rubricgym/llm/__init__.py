"""LLM clients for judges and verifiers (see :mod:`rubricgym.llm.client`)."""

from .client import ChatBackend, Completion, LLM, LLMCallError, LLMConfig, Usage, make_llm
from .jsonutil import JSONExtractionError, extract_json

__all__ = ["ChatBackend", "Completion", "JSONExtractionError", "LLM", "LLMCallError", "LLMConfig", "Usage",
           "extract_json", "make_llm"]
