"""Environment families, one package each (math, RAG support, tool use, and the worked example
``wordsort``). Each registers its own ids through a ``register()`` function named under the
``rubricgym.envs`` entry points in pyproject.toml; every env subclasses
:class:`rubricgym.chatenv.ChatEnv`. Nothing here knows about judges."""
