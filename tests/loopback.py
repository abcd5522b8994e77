"""Test helpers for the loopback servers: a free port, and a server that answers every chat completion with one
scripted error (shared by the client's and check-api's tests)."""

from __future__ import annotations

import socket

from rleif_kit.testing.fake_openai import _REASONS, FakeOpenAIServer, _Reply


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then closed): a connection there is refused at once, as with the
    endpoint down; a server started on it right after finds it free."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ScriptedErrorServer(FakeOpenAIServer):
    """Answers every chat completion with one scripted error: ``payload`` is JSON, or ``bytes`` sent as they are;
    ``models`` is what GET /v1/models lists (None: it fails with a 500)."""

    def __init__(self, status: int, payload, models=("pinned-7b", "other-13b"), **kw):
        super().__init__(**kw)
        self.status, self.payload, self.models = status, payload, models

    async def _chat(self, body):
        self._count(str(self.status))
        return _Reply(self.status, self.payload)

    async def _dispatch(self, method, path, headers, raw):
        if method == "GET" and path == "/v1/models":
            self._record(method, path, headers, None)
            if self.models is None:
                return _Reply(500, {"error": {"message": "no list here"}})
            return _Reply(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})
        return await super()._dispatch(method, path, headers, raw)

    async def _write(self, writer, reply):
        if not isinstance(reply.payload, bytes):
            return await super()._write(writer, reply)
        head = (f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Unknown')}\r\nContent-Type: text/html\r\n"
                f"Content-Length: {len(reply.payload)}\r\n\r\n")
        writer.write(head.encode("latin-1") + reply.payload)
        await writer.drain()
