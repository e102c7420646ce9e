"""A lean HTTP/1.1 keep-alive transport for `httpx` (the HTTP client under the OpenAI SDK).

At 64 requests in flight, httpcore's connection pool spends most of the client's CPU per
request scanning its connections; this transport keeps a plain list of idle connections per
origin and does one request per connection at a time, as a Chat Completions client needs.
The SDK above it is unchanged (authentication, timeouts, error classes), and so is httpx's
decoding of the body (gzip, ...). It speaks HTTP/1.1 with `Content-Length` or chunked bodies,
over TCP or TLS (the system's trust store). Where a proxy is configured in the environment
the SDK's default transport is used instead (`transport_for`).
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections import defaultdict
from typing import Any

import httpx2

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy")
_MAX_HEAD = 64 * 1024


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


class LeanTransport(httpx2.AsyncBaseTransport):
    def __init__(
        self, max_idle_per_origin: int = 256, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.idle: dict[tuple[str, str, int], list[_Connection]] = defaultdict(list)
        self.max_idle = max_idle_per_origin
        self._ssl = ssl_context

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    async def _connect(self, origin: tuple[str, str, int], timeout: float | None) -> _Connection:
        scheme, host, port = origin
        context = self._ssl_context() if scheme == "https" else None
        opening = asyncio.open_connection(host, port, ssl=context, limit=_MAX_HEAD)
        reader, writer = await asyncio.wait_for(opening, timeout)
        return _Connection(reader, writer)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        url = request.url
        scheme = url.scheme
        port = url.port or (443 if scheme == "https" else 80)
        origin = (scheme, url.host, port)
        body = await request.aread()
        head = [f"{request.method} {url.raw_path.decode('ascii')} HTTP/1.1".encode()]
        has_length = "content-length" in request.headers
        for name, value in request.headers.raw:
            head.append(name + b": " + value)
        if not has_length and request.method in ("POST", "PUT", "PATCH"):
            head.append(b"Content-Length: " + str(len(body)).encode())
        payload = b"\r\n".join(head) + b"\r\n\r\n" + body
        idle = self.idle[origin]
        for reused in (True, False):
            if reused and not idle:
                continue
            try:
                if reused:
                    connection = idle.pop()
                else:
                    connection = await self._connect(origin, timeouts.get("connect"))
            except TimeoutError:
                raise httpx2.ConnectTimeout("connect timed out", request=request) from None
            except OSError as error:
                raise httpx2.ConnectError(str(error), request=request) from None
            try:
                return await asyncio.wait_for(
                    self._exchange(connection, payload, request, origin), timeouts.get("read")
                )
            except _StaleConnection:
                connection.close()
                if not reused:
                    raise httpx2.RemoteProtocolError(
                        "server closed the connection without a response", request=request
                    ) from None
            except TimeoutError:
                connection.close()
                raise httpx2.ReadTimeout("read timed out", request=request) from None
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
                connection.close()
                raise httpx2.ReadError(
                    f"{type(error).__name__}: {error}", request=request
                ) from None
            except BaseException:
                connection.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _exchange(
        self,
        connection: _Connection,
        payload: bytes,
        request: httpx2.Request,
        origin: tuple[str, str, int],
    ) -> httpx2.Response:
        reader = connection.reader
        try:
            connection.writer.write(payload)
            await connection.writer.drain()
            status_line = await reader.readline()
        except (ConnectionResetError, BrokenPipeError) as error:
            raise _StaleConnection from error
        if not status_line:
            raise _StaleConnection
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise httpx2.RemoteProtocolError("malformed status line", request=request)
        status = int(parts[1])
        headers: list[tuple[bytes, bytes]] = []
        length: int | None = None
        chunked = close = False
        while (line := await reader.readline()) not in (b"\r\n", b"\n"):
            if not line:
                raise httpx2.RemoteProtocolError(
                    "connection closed in the headers", request=request
                )
            name, _, value = line.partition(b":")
            name, value = name.strip(), value.strip()
            headers.append((name, value))
            lower = name.lower()
            if lower == b"content-length":
                length = int(value)
            elif lower == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif lower == b"connection" and value.lower() == b"close":
                close = True
        if chunked:
            content = await self._read_chunked(reader)
        elif length is not None:
            content = await reader.readexactly(length)
        elif status in (204, 304) or 100 <= status < 200 or request.method == "HEAD":
            content = b""
        else:
            content, close = await reader.read(), True
        if close or status_line.startswith(b"HTTP/1.0"):
            connection.close()
        elif len(self.idle[origin]) < self.max_idle:
            self.idle[origin].append(connection)
        else:
            connection.close()
        return httpx2.Response(
            status,
            headers=headers,
            stream=httpx2.ByteStream(content),
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
        )

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        chunks = []
        while True:
            size_line = await reader.readline()
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)

    async def aclose(self) -> None:
        for connections in self.idle.values():
            for connection in connections:
                connection.close()
        self.idle.clear()


class _StaleConnection(Exception):
    """A kept-alive connection the server had closed: retried once on a fresh one."""


def proxy_configured() -> bool:
    return any(os.environ.get(name) for name in PROXY_VARIABLES)
