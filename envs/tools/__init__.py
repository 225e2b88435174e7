"""Tool-use environments: the SQLite customer-service sandbox and BFCL function calling."""

from rubricgym.registration import register_family

from .bfcl import check_calls, to_openai_schema, truth_calls
from .function_call import FunctionCallConfig, FunctionCallEnv
from .tool_use import ToolUseConfig, ToolUseEnv



def register() -> None:
    """The tool-use family's ids; ``ToolUseRuler-v0`` (the judge sees the tool schemas): reward =
    0.75 x env + 0.25 x RULER score."""
    register_family("ToolUse", ToolUseEnv, ruler={"combine": {"env": 0.75, "ruler": 0.25}})
    register_family("FunctionCall", FunctionCallEnv)


__all__ = ["register", "FunctionCallConfig", "FunctionCallEnv", "ToolUseConfig", "ToolUseEnv", "check_calls", "to_openai_schema", "truth_calls"]
