"""The HTTP client under the SDK (aiohttp), against a real socket server on loopback that
speaks keep-alive, chunked and gzip bodies, closes connections and stalls on purpose."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest
from loopback_server import completion

from dualcog.inference.client import AttemptFailed, ChatClient

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


class ScriptedServer:
    """Each accepted connection serves requests with `respond(request_number)` -> (bytes to
    send, whether to close the connection afterwards)."""

    def __init__(self, respond: Callable[[int], tuple[bytes, bool]], tls=None) -> None:
        self.respond = respond
        self.connections = 0
        self.requests = 0
        self.heads: list[bytes] = []  # each request's head, in arrival order
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_side=True)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except ConnectionError:
                continue  # a client that gave up the TLS handshake
            except OSError as error:
                if getattr(error, "reason", None):  # ssl.SSLError: a refused handshake
                    continue
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        data = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, data = data.split(b"\r\n\r\n", 1)
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                with self.lock:
                    self.requests += 1
                    self.heads.append(head)
                    number = self.requests
                reply, close = self.respond(number)
                if reply:
                    conn.sendall(reply)
                if close:
                    return

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def http(body: bytes, *headers: str, status: str = "200 OK", length: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", *headers]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def answer(text: str) -> bytes:
    return json.dumps(completion(text)).encode()


async def send_all(api_base: str, count: int, timeout: float = 5.0) -> list[str]:
    client = ChatClient(api_base, "EMPTY", timeout, pool=4)
    try:
        return [(await client.send(BODY)).content for _ in range(count)]
    finally:
        await client.close()


@pytest.fixture
def run() -> Iterator[Callable]:
    yield lambda coroutine: asyncio.run(coroutine)


def test_keep_alive_reuses_one_connection(run):
    with ScriptedServer(lambda n: (http(answer(f"a{n}")), False)) as server:
        assert run(send_all(server.api_base, 3)) == ["a1", "a2", "a3"]
    assert server.connections == 1


def test_each_request_carries_our_headers_and_the_cookies_a_server_set(run):
    def respond(n: int) -> tuple[bytes, bool]:
        cookie = ("Set-Cookie: route=r7; Path=/",) if n == 2 else ()
        return http(answer(f"a{n}"), *cookie), False

    with ScriptedServer(respond) as server:
        assert run(send_all(server.api_base, 3)) == ["a1", "a2", "a3"]
    heads = [head.decode().lower().split("\r\n") for head in server.heads]
    for head in heads:
        assert head[0] == "post /v1/chat/completions http/1.1"
        assert "authorization: bearer empty" in head
        assert "content-type: application/json" in head
        assert "accept: application/json" in head
        assert f"content-length: {len(BODY)}" in head
        assert any(line.startswith("user-agent: ") for line in head)
    # A cookie the server set (a load balancer's sticky route) goes with the later requests.
    assert [any(line.startswith("cookie:") for line in head) for head in heads] == [
        False,
        False,
        True,
    ]
    assert "cookie: route=r7" in heads[2]


def test_tls_trusts_ssl_cert_file_and_checks_the_server_name(tmp_path, run, monkeypatch):
    if shutil.which("openssl") is None:
        if os.environ.get("CI"):
            pytest.fail("openssl is needed for the TLS test in CI")
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    with ScriptedServer(lambda n: (http(answer(f"tls{n}")), False), server_context) as server:
        port = server.sock.getsockname()[1]
        # Not trusted: the system's CA bundle does not hold the certificate.
        with pytest.raises(AttemptFailed, match="CERTIFICATE_VERIFY_FAILED"):
            run(send_all(f"https://localhost:{port}/v1", 1))
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert run(send_all(f"https://localhost:{port}/v1", 2)) == ["tls1", "tls2"]
        # Trusted, but not the name it was issued to.
        with pytest.raises(AttemptFailed, match="CERTIFICATE_VERIFY_FAILED"):
            run(send_all(f"https://127.0.0.1:{port}/v1", 1))


def test_chunked_and_gzip_bodies(run):
    packed = gzip.compress(answer("zipped"))
    chunks = b"".join(
        f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for piece in (packed[:10], packed[10:])
    )
    reply = http(
        chunks + b"0\r\n\r\n", "Transfer-Encoding: chunked", "Content-Encoding: gzip", length=False
    )
    with ScriptedServer(lambda n: (reply, False)) as server:
        assert run(send_all(server.api_base, 2)) == ["zipped", "zipped"]
    assert server.connections == 1


def test_a_connection_the_server_closed_is_replaced(run):
    # The server drops every connection after one answer without saying so (an idle timeout).
    with ScriptedServer(lambda n: (http(answer(f"a{n}")), True)) as server:
        assert run(send_all(server.api_base, 3)) == ["a1", "a2", "a3"]
    assert server.connections == 3 and server.requests == 3


def test_connection_close_and_bodies_without_length(run):
    replies = {
        1: (http(answer("closing"), "Connection: close"), True),
        2: (http(answer("to the end"), "Connection: close", length=False), True),
    }
    with ScriptedServer(lambda n: replies[n]) as server:
        assert run(send_all(server.api_base, 2)) == ["closing", "to the end"]
    assert server.connections == 2


def test_status_codes_and_retry_after_reach_the_classifier(run):
    reply = http(b'{"error": {"message": "slow"}}', "Retry-After: 7", status="429 Too Many")
    with ScriptedServer(lambda n: (reply, False)) as server, pytest.raises(AttemptFailed) as info:
        run(send_all(server.api_base, 1))
    assert info.value.error_type == "http_429" and info.value.retryable
    assert info.value.retry_after == 7.0


def test_a_stalled_reply_times_out(run):
    with ScriptedServer(lambda n: (b"", False)) as server, pytest.raises(AttemptFailed) as info:
        run(send_all(server.api_base, 1, timeout=0.3))
    assert info.value.error_type == "timeout"


def test_a_connection_closed_without_reply_is_a_connection_error(run):
    with ScriptedServer(lambda n: (b"", True)) as server, pytest.raises(AttemptFailed) as info:
        run(send_all(server.api_base, 1))
    assert info.value.error_type == "connection" and info.value.retryable
