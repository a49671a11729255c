"""`Drain`, the cut of the requests a stopping server still runs when its grace period
ends: the answer each one gets, and the cancellations it must not take for its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from memoryd.errors import HttpError
from memoryd.server.calls import WRITING, Drain


def _request(method: str = "POST", extra: dict[str, Any] | None = None) -> Request:
    scope = {"type": "http", "method": method, "path": "/v1/conversations/c/messages"}
    return Request({**scope, "memoryd.op": "add", **(extra or {})})


async def _never(request: Request) -> Response:
    await asyncio.Event().wait()  # a body that never comes, a store that never answers
    raise AssertionError("unreachable")


async def _quick(request: Request) -> Response:
    return Response(b"done")


def _run(drain: Drain, endpoint: Any, request: Request, cut_after_s: float) -> Any:
    async def main() -> Any:
        drain.bind(asyncio.get_running_loop())
        drain.stop(cut_after_s)
        return await drain.run(endpoint, request)

    return asyncio.run(main())


def test_a_request_still_running_at_the_cut_gets_a_503_saying_nothing_was_written() -> None:
    with pytest.raises(HttpError) as cut:
        _run(Drain(), _never, _request(), 0.01)
    assert (cut.value.status, cut.value.type_name) == (503, "StoreUnavailable")
    assert "nothing was written" in str(cut.value)


def test_a_write_handed_to_its_store_gets_a_504_saying_its_outcome_is_unknown() -> None:
    with pytest.raises(HttpError) as cut:
        _run(Drain(), _never, _request(extra={WRITING: True}), 0.01)
    assert (cut.value.status, cut.value.type_name) == (504, "WriteTimeout")
    assert "same idempotency key" in str(cut.value)


def test_a_request_that_finishes_before_the_cut_is_answered() -> None:
    response = _run(Drain(), _quick, _request(), 60.0)
    assert response.body == b"done"


def test_a_request_started_after_the_cut_is_answered_at_once() -> None:
    drain = Drain()

    async def main() -> None:
        drain.bind(asyncio.get_running_loop())
        drain.stop(0.0)
        await asyncio.sleep(0.01)  # the loop runs the cut
        await drain.run(_quick, _request(method="GET"))

    with pytest.raises(HttpError) as cut:
        asyncio.run(main())
    assert cut.value.status == 503


def test_another_cancellation_is_not_taken_for_the_cut() -> None:
    """A request cancelled by someone else (uvicorn, past its own grace) stays cancelled."""
    drain = Drain()

    async def main() -> None:
        drain.bind(asyncio.get_running_loop())
        drain.stop(60.0)
        task = asyncio.create_task(drain.run(_never, _request()))
        await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


def test_an_unbound_drain_never_cuts() -> None:
    """A drain whose loop was never bound (an app served without its lifespan) runs its
    requests as they are: stopping it does nothing."""
    drain = Drain()
    drain.stop(0.0)
    assert asyncio.run(drain.run(_quick, _request())).body == b"done"
