"""Tool-use environments: the SQLite customer-service sandbox and BFCL function calling."""

from .bfcl import check_calls, to_openai_schema, truth_calls
from .function_call import FunctionCallConfig, FunctionCallEnv
from .tool_use import ToolUseConfig, ToolUseEnv

__all__ = ["FunctionCallConfig", "FunctionCallEnv", "ToolUseConfig", "ToolUseEnv", "check_calls", "to_openai_schema", "truth_calls"]
