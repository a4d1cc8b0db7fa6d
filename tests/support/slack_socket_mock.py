"""A loopback stand-in for Slack's Socket Mode endpoint: just enough RFC 6455 to talk to
slack_sdk's built-in client (plain `ws://` on a non-443 port, which the client allows for tests).

It accepts the client's handshake, answers pings, sends envelopes Slack-style and records every
JSON frame the client sends back (the acks, keyed by `envelope_id`). Like Slack it pings the
client now and then — every 50 ms here, because the client's receive loop holds a lock for up to
its 3-second read timeout and `close()` waits on that lock; a ping ends each wait early.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import time
from typing import Any

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


class MockSocketMode:
    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(4)
        self.port = self._listener.getsockname()[1]
        self.received: list[dict[str, Any]] = []
        self.connections = 0
        self._conn: socket.socket | None = None
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="mock-socket-mode", daemon=True).start()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/link/?ticket=test-ticket&app_id=A0PACER"

    def send(self, envelope: dict[str, Any]) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._conn is not None, timeout=5):
                raise AssertionError("the Socket Mode client never connected")
            conn = self._conn
        assert conn is not None
        self._write(conn, TEXT, json.dumps(envelope).encode())

    def wait_for_ack(self, envelope_id: str, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for frame in self.received:
                    if frame.get("envelope_id") == envelope_id:
                        return frame
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no ack for {envelope_id}; got {self.received}")
                self._cond.wait(left)

    def stop(self) -> None:
        self._closed = True
        self._listener.close()
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            headers = dict(
                line.split(": ", 1) for line in request.decode().split("\r\n")[1:] if ": " in line
            )
            key = headers.get("Sec-WebSocket-Key", "").strip().encode()
            accept = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
            conn.sendall(
                (
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
                ).encode()
            )
            with self._cond:
                self._conn = conn
                self.connections += 1
                self._cond.notify_all()
            threading.Thread(target=self._ping, args=(conn,), daemon=True).start()
            self._read_frames(conn)
        except OSError:
            return

    def _read_frames(self, conn: socket.socket) -> None:
        while True:
            head = _recv_exact(conn, 2)
            if head is None:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack("!H", _recv_exact(conn, 2) or b"\0\0")[0]
            elif length == 127:
                length = struct.unpack("!Q", _recv_exact(conn, 8) or b"\0" * 8)[0]
            mask = _recv_exact(conn, 4) if head[1] & 0x80 else b"\0\0\0\0"
            data = _recv_exact(conn, length) if length else b""
            if mask is None or data is None:
                return
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == PING:
                self._write(conn, PONG, payload)
            elif opcode == CLOSE:
                self._write(conn, CLOSE, payload[:2])
                return
            elif opcode == TEXT:
                with self._cond:
                    self.received.append(json.loads(payload.decode()))
                    self._cond.notify_all()

    def _ping(self, conn: socket.socket) -> None:
        while not self._closed and conn.fileno() != -1:
            self._write(conn, PING, b"mock")
            time.sleep(0.05)

    def _write(self, conn: socket.socket, opcode: int, payload: bytes) -> None:
        length = len(payload)
        if length < 126:
            header = struct.pack("!BB", 0x80 | opcode, length)
        elif length < 65536:
            header = struct.pack("!BBH", 0x80 | opcode, 126, length)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 127, length)
        with self._send_lock:
            try:
                conn.sendall(header + payload)
            except OSError:
                pass


def _recv_exact(conn: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        try:
            chunk = conn.recv(size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data
