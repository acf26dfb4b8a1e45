from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from retrieval_pipeline.core.report.alerts import Alert, AlertSink


def make_alert() -> Alert:
    return Alert("stdlib", "retrieval_metrics", "run1", [{"check": "min_mrr"}], "mrr low", "2026-01-01T00:00:00")


def test_alert_is_logged(tmp_path):
    sink = AlertSink(tmp_path / "alerts.jsonl")
    assert sink.send(make_alert()) is None
    assert sink.read()[0]["summary"] == "mrr low"


def test_webhook_receives_alert_on_loopback(tmp_path):
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        sink = AlertSink(tmp_path / "a.jsonl", f"http://127.0.0.1:{server.server_port}/hook")
        assert sink.send(make_alert()) is None
        thread.join(timeout=5)
    finally:
        server.server_close()
    assert received and received[0]["text"] == "mrr low"


def test_unreachable_webhook_is_reported_not_raised(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_port
    server.server_close()  # nothing listens on this port now
    sink = AlertSink(tmp_path / "a.jsonl", f"http://127.0.0.1:{port}/hook", timeout_s=1)
    error = sink.send(make_alert())
    assert error and error.startswith("webhook failed")
    assert len(sink.read()) == 1  # still logged
