"""The HTML report in a real browser: Debian's chromium, headless, driven over the DevTools protocol.

Chromium opens the report file, the page says (DevTools ``Runtime.evaluate``) that every chart image
decoded with a non-zero size, and a full-page screenshot (``Page.captureScreenshot``) shows chart colours
inside each chart's box. Every wait is bounded; the chromium started here runs in its own process group
and only that group is ended. Skipped when chromium is not installed.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from websockets.sync.client import ClientConnection, connect

from retrieval_pipeline.core.report.data import ReportData
from retrieval_pipeline.core.report.html import build_report
from retrieval_pipeline_tests.core.conftest import in_ci
from retrieval_pipeline_tests.core.report.test_html import HOSTILE_QUERY, synthetic_data

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PROJECT_ROOT = Path(__file__).resolve().parents[3]
REAL_OUT = PROJECT_ROOT / "data" / "out"
REAL_SCREENSHOT = Path("/tmp/report_stdlib.png")
WIDTH = 1280
START_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 30.0
MAX_PAGE_HEIGHT = 20_000


@pytest.fixture(autouse=True)
def _chromium_present() -> None:
    """Skip without chromium; fail under CI=true, where `make test` installs it (a browser test must not pass by skipping)."""
    if not os.access(CHROMIUM, os.X_OK):
        reason = f"Debian's chromium is not installed ({CHROMIUM} missing: apt-get install chromium)"
        if in_ci():
            pytest.fail(f"CI=true, and {reason}", pytrace=False)
        pytest.skip(reason)


#: Waits for every chart image to decode, then reports its state and box (page coordinates) and the page's size.
CHART_STATE_JS = """
(async () => {
  const charts = [...document.querySelectorAll('img.chart, svg.chart')];
  await Promise.all(charts.filter(c => c.decode).map(c => c.decode().catch(() => null)));
  return {
    height: document.documentElement.scrollHeight,
    scripts: document.querySelectorAll('script').length,
    text: document.body.innerText,
    charts: charts.map(c => {
      const r = c.getBoundingClientRect();
      return {
        name: c.dataset.chart || c.tagName, tag: c.tagName.toLowerCase(),
        complete: c.tagName === 'IMG' ? c.complete : true,
        naturalWidth: c.tagName === 'IMG' ? c.naturalWidth : r.width,
        x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height,
      };
    }),
  };
})()
"""


class DevTools:
    """A minimal DevTools protocol client over one page's websocket: commands with ids, events waited for with a deadline."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.next_id = 0

    def _receive_until(self, done, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no DevTools answer within {timeout} s")
            message = json.loads(self.socket.recv(timeout=left))
            if done(message):
                return message

    def call(self, method: str, timeout: float = COMMAND_TIMEOUT_S, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (raises on a protocol error)."""
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        answer = self._receive_until(lambda m: m.get("id") == ident, timeout)
        if "error" in answer:
            raise RuntimeError(f"DevTools {method} failed: {answer['error']}")
        return answer["result"]

    def wait_for(self, event: str, timeout: float = COMMAND_TIMEOUT_S) -> dict[str, Any]:
        return self._receive_until(lambda m: m.get("method") == event, timeout)


def _stop_group(process: subprocess.Popen) -> None:
    """End the process group of the chromium started here (TERM, then KILL after a bounded wait)."""
    pgid = process.pid  # start_new_session=True: the launcher leads its own group
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=0.2)
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
    raise RuntimeError(f"chromium process group {pgid} survived SIGKILL")


def _devtools_port(profile: Path, process: subprocess.Popen) -> int:
    """The port chromium chose for ``--remote-debugging-port=0`` (first line of ``DevToolsActivePort``)."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before opening DevTools")
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text().splitlines()[0])
        time.sleep(0.1)
    raise TimeoutError(f"chromium opened no DevTools port within {START_TIMEOUT_S} s")


def _page_socket_url(port: int) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with opener.open(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
            pages = [t for t in json.load(answer) if t.get("type") == "page"]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.1)
    raise TimeoutError("chromium showed no page target")


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[DevTools]:
    """Headless chromium on about:blank with a throwaway profile; yields a DevTools client of its page."""
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        f"--window-size={WIDTH},4000",
        "about:blank",
    ]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        url = _page_socket_url(_devtools_port(profile, process))
        with connect(url, proxy=None, max_size=None, open_timeout=10, close_timeout=5) as socket:
            yield DevTools(socket)
    finally:
        _stop_group(process)


def render(devtools: DevTools, page: Path) -> tuple[dict[str, Any], Image.Image]:
    """Open ``page``; return the chart state (:data:`CHART_STATE_JS`) and a full-page screenshot."""
    devtools.call("Page.enable")
    devtools.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=4000, deviceScaleFactor=1, mobile=False)
    devtools.call("Page.navigate", url=page.resolve().as_uri())
    devtools.wait_for("Page.loadEventFired")
    answer = devtools.call("Runtime.evaluate", expression=CHART_STATE_JS, awaitPromise=True, returnByValue=True)
    state = answer["result"]["value"]
    height = min(int(state["height"]), MAX_PAGE_HEIGHT)
    shot = devtools.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1},
    )
    image = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    return state, image


def undrawn_charts(state: dict[str, Any], screenshot: Image.Image, min_ink: float = 0.02) -> dict[str, str]:
    """``{chart: why}`` for each chart that did not decode, has no size, or shows (almost) only background in the screenshot.

    Ink: the share of the chart's box whose pixels differ from white by more than 40 (sum over RGB), plus
    at least one saturated pixel (a coloured bar or line, not just grey axes and text).
    """
    problems: dict[str, str] = {}
    pixels = np.asarray(screenshot, dtype=np.int16)
    for chart in state["charts"]:
        name = chart["name"]
        if not chart["complete"] or chart["naturalWidth"] <= 0:
            problems[name] = f"image not decoded (complete={chart['complete']}, naturalWidth={chart['naturalWidth']})"
            continue
        if chart["width"] < 50 or chart["height"] < 50:
            problems[name] = f"rendered at {chart['width']}x{chart['height']} px"
            continue
        top, left = int(chart["y"]) + 2, int(chart["x"]) + 2
        box = pixels[top : int(chart["y"] + chart["height"]) - 2, left : int(chart["x"] + chart["width"]) - 2]
        if box.size == 0:
            problems[name] = "outside the screenshot"
            continue
        ink = float(((255 - box).sum(axis=2) > 40).mean())
        saturated = int(((box.max(axis=2) - box.min(axis=2)) > 80).sum())
        if ink < min_ink or saturated == 0:
            problems[name] = f"almost blank in the screenshot (ink {ink:.3f}, {saturated} coloured pixels)"
    return problems


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[DevTools]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as devtools:
        yield devtools


def test_synthetic_report_draws_every_chart_in_chromium(browser, tmp_path: Path):
    page = tmp_path / "report.html"
    page.write_text(build_report(synthetic_data()), encoding="utf-8")
    state, screenshot = render(browser, page)
    assert sorted(c["name"] for c in state["charts"]) == ["bars", "ranks", "sweep", "trend"]
    assert undrawn_charts(state, screenshot) == {}
    assert state["scripts"] == 0
    assert HOSTILE_QUERY in state["text"]  # the hostile query is shown as text
    assert screenshot.width == WIDTH and screenshot.height >= state["charts"][-1]["y"]
    table_top = screenshot.crop((0, 0, WIDTH, 300))
    assert np.asarray(table_top).min() < 100  # the header text is drawn (dark pixels), not a blank page


def test_the_check_notices_a_broken_and_a_blank_chart(browser, tmp_path: Path):
    """The checks can fail: a chart whose PNG is corrupt does not decode, one that is all white shows no ink."""
    document = build_report(synthetic_data())
    white = io.BytesIO()
    Image.new("RGB", (800, 300), "white").save(white, format="PNG")
    start = document.index("base64,", document.index('data-chart="bars"')) + len("base64,")
    end = document.index('"', start)
    document = document[:start] + "bm90IGEgcG5n" + document[end:]  # "not a png"
    start = document.index("base64,", document.index('data-chart="ranks"')) + len("base64,")
    end = document.index('"', start)
    document = document[:start] + base64.b64encode(white.getvalue()).decode() + document[end:]
    page = tmp_path / "broken.html"
    page.write_text(document, encoding="utf-8")
    state, screenshot = render(browser, page)
    problems = undrawn_charts(state, screenshot)
    assert set(problems) == {"bars", "ranks"}
    assert "not decoded" in problems["bars"] and "blank" in problems["ranks"]


def _real(asset: str) -> pd.DataFrame | None:
    path = REAL_OUT / asset / "stdlib.parquet"
    return pd.read_parquet(path) if path.exists() else None


def _computed_inputs(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The newer assets' frames for stdlib: stored Parquet when the pipeline made them, else computed by their core functions."""
    from retrieval_pipeline.core.registry import DEFAULT_REGISTRY_PATH, load_registry

    registry = load_registry(DEFAULT_REGISTRY_PATH)
    config = registry.get("stdlib")
    out: dict[str, pd.DataFrame] = {}
    stored = {name: _real(name) for name in ("metric_significance", "fusion_sweep", "failure_buckets")}
    if stored["metric_significance"] is not None:
        out["significance"] = stored["metric_significance"]
    else:
        from retrieval_pipeline.core.evaluation.statistics.significance import significance_table

        out["significance"] = significance_table(frames["query_results"], config.retrievers, config.baseline_retriever, config.statistics)
    if stored["failure_buckets"] is not None:
        out["failure_buckets"] = stored["failure_buckets"]
    else:
        from retrieval_pipeline.core.evaluation.buckets import failure_buckets

        out["failure_buckets"] = failure_buckets(frames["query_results"], frames["retrieval_dataset"], frames["corpus"], k=5)
    if stored["fusion_sweep"] is not None:
        out["fusion_sweep"] = stored["fusion_sweep"]
    elif (runs := _real("retrieval_runs")) is not None:
        from retrieval_pipeline.core.evaluation.scoring import evaluated_qrels
        from retrieval_pipeline.core.evaluation.tuning.fusion_sweep import sweep

        hybrids = [s for s in (registry.retrievers.get(n) for n in config.retrievers) if s.kind == "hybrid"]
        qrels = evaluated_qrels(runs, frames["retrieval_dataset"])
        out["fusion_sweep"] = sweep(runs, qrels, hybrids, config.tuning, config.retrieval.depth, dataset="stdlib").curve
    return out


@pytest.mark.skipif(
    not all((REAL_OUT / a / "stdlib.parquet").exists() for a in ("retrieval_metrics", "query_results", "retrieval_dataset", "corpus")),
    reason="no real stdlib outputs in data/out (materialise the stdlib partition first)",
)
def test_real_stdlib_report_in_chromium_saves_a_screenshot(browser, tmp_path: Path):
    frames = {a: _real(a) for a in ("retrieval_metrics", "query_results", "retrieval_dataset", "corpus")}
    extra = _computed_inputs(frames)
    ts = (REAL_OUT / "retrieval_metrics" / "stdlib.parquet").stat().st_mtime
    from retrieval_pipeline.core.report.data import trend_frame

    trend = trend_frame(
        [
            (
                ts,
                {
                    f"{r['retriever']}/{m}": r[m]
                    for r in frames["retrieval_metrics"].to_dict("records")
                    for m in ("hit_rate@5", "mrr", "ndcg@10")
                },
            )
        ]
    )
    data = ReportData(
        dataset="stdlib",
        description="The project's own sample (report from the real data/out frames).",
        baseline="bm25",
        retrievers=list(frames["retrieval_metrics"]["retriever"]),
        metrics=frames["retrieval_metrics"],
        query_results=frames["query_results"],
        retrieval_dataset=frames["retrieval_dataset"],
        corpus=frames["corpus"],
        trend=trend,
        **extra,
    )
    page = tmp_path / "report_stdlib.html"
    page.write_text(build_report(data), encoding="utf-8")
    state, screenshot = render(browser, page)
    screenshot.save(REAL_SCREENSHOT)
    expected = {"bars", "ranks", "trend"} | ({"sweep"} if len(extra.get("fusion_sweep", [])) else set())
    assert {c["name"] for c in state["charts"]} == expected
    assert undrawn_charts(state, screenshot) == {}
    assert REAL_SCREENSHOT.stat().st_size > 10_000
