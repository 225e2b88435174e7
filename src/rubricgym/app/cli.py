"""The ``rubricgym`` command line: one subcommand per recipe (:mod:`rubricgym.recipes`), every flag
generated from the recipe's config dataclass (:mod:`rubricgym.app.flags`).

Examples:
    >>> main(["envs"])                                         # doctest: +ELLIPSIS
    Math-v0 ...
    0
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's) into its recipe's config and run it."""
    from rubricgym import recipes

    config = recipes.parse(sys.argv[1:] if argv is None else list(argv))
    return recipes.recipe_of(config).run(config)


if __name__ == "__main__":
    sys.exit(main())
