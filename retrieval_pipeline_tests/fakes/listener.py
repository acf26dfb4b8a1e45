"""A TCP listener on 127.0.0.1 that records every connection: what the hostile-code tests point a sandboxed
connect at (the sandbox's network tests, the LLM prover's hostile checks), to see that nothing got through."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def listener(seconds: float = 120) -> Iterator[tuple[int, list[object]]]:
    """``(port, accepted)``: a loopback port, and the connections it accepted (each closed at once).

    It accepts for at most ``seconds`` and stops when the block ends."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def loop() -> None:
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
