"""`retrieve`: a task's failure read, so that one nobody awaited is not logged as never retrieved.

A task that several requests wait for through `asyncio.shield` (one listing, one exchange, one
secret read per key) outlives every waiter that gave up; were it then to fail, asyncio would log
"Task exception was never retrieved" when it is collected. `task.add_done_callback(retrieve)`
reads the outcome as soon as the task ends; the waiters still get the failure raised.
"""

from __future__ import annotations

import asyncio
from typing import Any


def retrieve(task: asyncio.Task[Any]) -> None:
    """Read a finished task's exception (a done callback); a cancelled task has none to read."""
    if not task.cancelled():
        task.exception()
