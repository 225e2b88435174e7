"""Tool-use environments: BFCL function calling (and, as they land, the SQLite customer-service sandbox)."""

from .bfcl import check_calls, to_openai_schema, truth_calls
from .function_call import FunctionCallConfig, FunctionCallEnv

__all__ = ["FunctionCallConfig", "FunctionCallEnv", "check_calls", "to_openai_schema", "truth_calls"]
