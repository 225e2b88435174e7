"""Tool-use environments: the SQLite customer-service sandbox and BFCL function calling."""

from functools import partial

from rubricgym.data import register_dataset
from rubricgym.registration import register_family

from .bfcl import CATEGORIES, CATEGORY_ROWS, check_calls, rows_from_upstream, to_openai_schema, truth_calls, upstream_urls
from .function_call import FunctionCallConfig, FunctionCallEnv
from .tool_use import ToolUseConfig, ToolUseEnv, tooluse_candidates



def register() -> None:
    """The tool-use family's ids; ``ToolUseRuler-v0`` (the judge sees the tool schemas): reward =
    0.75 x env + 0.25 x RULER score."""
    for category in CATEGORIES:
        register_dataset(f"bfcl_{category}", f"bfcl_v4/{category}.jsonl", urls=upstream_urls(category),
                         licence="Apache-2.0 (ShishirPatil/gorilla)", convert=partial(rows_from_upstream, category),
                         rows=CATEGORY_ROWS[category])
    register_family("ToolUse", ToolUseEnv, ruler={"combine": {"env": 0.75, "ruler": 0.25}})
    register_family("FunctionCall", FunctionCallEnv)


__all__ = ["register", "FunctionCallConfig", "FunctionCallEnv", "ToolUseConfig", "ToolUseEnv", "check_calls", "to_openai_schema", "tooluse_candidates", "truth_calls"]
