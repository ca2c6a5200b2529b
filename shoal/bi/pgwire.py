"""Kept for imports written before the endpoint became the package `shoal.bi.pg`: use that."""

from shoal.bi.pg import *  # noqa: F403
from shoal.bi.pg.codec import *  # noqa: F403
from shoal.bi.pg.server import *  # noqa: F403
from shoal.bi.pg.session import *  # noqa: F403
