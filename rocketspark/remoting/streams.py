"""Serving a streaming request: its handler's responses, one by one, until it ends.

Apart from :mod:`rocketspark.remoting.server` because it is an async generator, which mypyc
does not compile (``setup.py`` compiles the dispatcher, whose ``open_stream`` checks the request
and whose ``failed`` answers an error, as for any request).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from rocketspark.protocol.command import RemotingCommand
from rocketspark.remoting.admission import Ticket
from rocketspark.remoting.server import Dispatcher


async def serve_stream(
    dispatcher: Dispatcher, request: RemotingCommand, ticket: Ticket
) -> AsyncIterator[RemotingCommand]:
    """An accepted streaming request's responses; a failure ends the stream with its error
    response, and the handler's own clean-up runs when the stream ends (done, stopped by the
    client, or its connection closed)."""
    responses = dispatcher.open_stream(request, ticket)
    if isinstance(responses, RemotingCommand):  # refused: its shape, or its user's permission
        yield responses
        return
    try:
        async for response in responses:
            yield response
    except Exception as exc:  # not BaseException: a stopped stream is no error
        yield dispatcher.failed(request, exc)
    finally:
        if isinstance(responses, AsyncGenerator):
            await responses.aclose()
