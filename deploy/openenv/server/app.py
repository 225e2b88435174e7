"""The app this folder's container serves (``openenv.yaml``'s ``app``): the id in ``RUBRICGYM_ENV_ID``
(default ``Math-v0``), built with ``RUBRICGYM_ENV_KWARGS`` (JSON); see rubricgym.openenv.server."""

from rubricgym.openenv.server import app_from_environ

app = app_from_environ()
