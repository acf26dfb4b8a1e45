"""Alerts: one record per failing evaluation, appended to a JSONL log and optionally POSTed to a webhook."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Alert:
    dataset: str
    asset: str
    run_id: str
    failed_checks: list[dict[str, Any]]
    summary: str
    created_at: str
    extra: dict[str, Any] = field(default_factory=dict)


class AlertSink:
    """Append alerts to ``log_path``; POST them as JSON to ``webhook_url`` when one is set.

    A webhook failure is reported back (returned), never raised: an unreachable chat server must not
    stop the next alert from being logged.
    """

    def __init__(self, log_path: Path, webhook_url: str | None = None, timeout_s: float = 5.0) -> None:
        self.log_path = log_path
        self.webhook_url = webhook_url
        self.timeout_s = timeout_s

    def send(self, alert: Alert) -> str | None:
        """Log the alert; returns an error message if the webhook could not be reached."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        payload = asdict(alert)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(payload, default=str) + "\n")
        if not self.webhook_url:
            return None
        request = urllib.request.Request(
            self.webhook_url,
            data=json.dumps({"text": alert.summary, "alert": payload}, default=str).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except OSError as exc:
            return f"webhook failed: {exc}"
        return None

    def read(self) -> list[dict[str, Any]]:
        """Every alert logged so far (empty when none)."""
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text(encoding="utf-8").splitlines() if line.strip()]
