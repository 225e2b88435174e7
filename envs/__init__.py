"""Environment families: math, and (as issues land) RAG support and tool use."""
