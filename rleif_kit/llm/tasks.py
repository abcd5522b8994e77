"""One bounded async task runner: at most ``max_live`` jobs in flight, results handled in completion order.

Evol-Instruct (stage 01 and the IRM fan-out) and the endpoint judges of stage 04 both run their requests
through it, so there is one place that decides how much is in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable, TypeVar

T = TypeVar("T")


async def run_bounded(items: Iterable[T], work: Callable[[T], Awaitable[Any]],
                      on_result: Callable[[T, Any, int], None], max_live: int, stop: Callable[[], bool]) -> None:
    """Run ``work(item)`` for each item with at most ``max_live`` in progress; ``on_result(item, result,
    in_flight)`` is called in completion order. No new job starts once ``stop()`` is true.

    Finished jobs report through a queue (O(1) per completion, unlike re-scanning the live set with
    ``asyncio.wait``), so the runner's own cost stays a small share of the client's.
    """
    pending, live = iter(items), 0
    finished: asyncio.Queue[tuple[T, asyncio.Future]] = asyncio.Queue()
    while True:
        while live < max_live and not stop():
            item = next(pending, None)
            if item is None:
                break
            job = asyncio.ensure_future(work(item))
            job.add_done_callback(lambda j, it=item: finished.put_nowait((it, j)))
            live += 1
        if live == 0:
            return
        item, job = await finished.get()
        live -= 1
        on_result(item, job.result(), live)
