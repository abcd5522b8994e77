"""One bounded async task runner: at most ``max_live`` jobs in flight, results handled in completion order; and the
gate that holds an endpoint to one request until it first answered.

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


class FirstAnswerGate:
    """Until an endpoint first answered, one request at a time: the first goes alone and the others wait for its
    answer. Why: a wrong key, URL or model fails every request alike; the first answer stops the run (a
    rejection), so it costs 1 request instead of ``concurrency``. Afterwards it costs nothing (one bool).
    The event is remade on a new event loop (``run_sync`` in Jupyter runs each call on a fresh one)."""

    def __init__(self) -> None:
        self.answered = False
        self._probing = False
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def limit(self, concurrency: int) -> int:
        """How many may be in flight now (for a runner that counts them itself)."""
        return concurrency if self.answered else 1

    async def enter(self) -> bool:
        """Wait for the first answer unless this request is the one that goes first (then True)."""
        if self.answered:
            return False
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._event, self._loop, self._probing = asyncio.Event(), loop, False
        if not self._probing:
            self._probing = True
            self._event.clear()
            return True
        await self._event.wait()
        return False

    def leave(self, first: bool) -> None:
        """The request ``enter`` let go first has ended (answered, failed or cancelled): release the others."""
        if first and self._event is not None:
            self._probing = False
            self._event.set()
