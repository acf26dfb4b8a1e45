"""A real Dagster webserver on a test-only ``DAGSTER_HOME``, and pages of it in headless Chromium (DevTools protocol).

:func:`webserver` starts ``dagster-webserver -m retrieval_pipeline.definitions`` on a free loopback port in its own
process group and ends that group; :func:`open_page` loads a UI page, waits (bounded) until its text holds what the
caller waits for, optionally clicks a button by its label, and saves a screenshot. Used by the UI tests, and to
take the screenshots of ``docs/screenshots``.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from PIL import Image

from retrieval_pipeline_tests.core.report.test_report_browser import DevTools

PROJECT = Path(__file__).resolve().parents[2]
#: The definitions load in a code server: minutes on two busy cores.
STARTUP_S = 300.0
WIDTH, HEIGHT = 1400, 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dagster_home_for_tests(path: Path) -> Path:
    """A ``DAGSTER_HOME`` for tests: telemetry off, and no "Join the Dagster community" dialog over the pages."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    return path


@contextlib.contextmanager
def webserver(home: Path, log: Path, workspace: Path | str = "workspace.yaml") -> Iterator[str]:
    """``dagster-webserver`` on ``home`` and ``workspace`` (default: the project's); yields its base URL once it
    answers, then ends its process group."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "dagster_webserver",
        "-w",
        str(workspace),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]  # location retrieval_pipeline
    env = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(PROJECT)}
    process = subprocess.Popen(
        command, cwd=PROJECT, env=env, stdin=subprocess.DEVNULL, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None:
                raise RuntimeError("dagster-webserver exited:\n" + log.read_text()[-3000:])
            try:
                urllib.request.urlopen(f"{url}/server_info", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("dagster-webserver did not answer:\n" + log.read_text()[-3000:]) from None
                time.sleep(1)
        yield url
    finally:
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=wait)
                break


#: Clicks the first button (or link) whose own text is the label; says whether one was found.
CLICK_JS = """
(() => {
  const label = %s;
  const hit = [...document.querySelectorAll('button, a, [role=button]')].find(b => b.innerText.trim() === label);
  if (hit) { hit.click(); return true; }
  return false;
})()
"""


def page_text(devtools: DevTools) -> str:
    answer = devtools.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''", returnByValue=True)
    return str(answer["result"].get("value") or "")


def count(devtools: DevTools, selector: str) -> int:
    """How many elements of the page match the CSS ``selector``."""
    answer = devtools.call("Runtime.evaluate", expression=f"document.querySelectorAll({json.dumps(selector)}).length", returnByValue=True)
    return int(answer["result"].get("value") or 0)


def wait_for_text(devtools: DevTools, needles: list[str], timeout: float) -> str:
    """The page's text once it holds every one of ``needles`` (the definitions may still be loading)."""
    deadline = time.monotonic() + timeout
    while True:
        text = page_text(devtools)
        if all(n in text for n in needles):
            return text
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page never showed {needles}; it shows:\n{text[:3000]}")
        time.sleep(1)


def open_page(
    devtools: DevTools, url: str, wait: list[str], *, click: list[str] = (), then: list[str] = (), timeout: float = 240.0
) -> tuple[str, Image.Image]:
    """Load ``url``; wait for ``wait``; click each label of ``click`` in turn; wait for ``then``; return its text and a screenshot."""
    devtools.call("Page.enable")
    devtools.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)
    devtools.call("Page.navigate", url=url)
    text = wait_for_text(devtools, wait, timeout)
    for label in click:
        answer = devtools.call("Runtime.evaluate", expression=CLICK_JS % json.dumps(label), returnByValue=True)
        if not answer["result"].get("value"):
            raise AssertionError(f"no button {label!r} on {url}")
        time.sleep(1)
    if then:
        text = wait_for_text(devtools, list(then), 60.0)
    time.sleep(2)  # charts animate in
    shot = devtools.call("Page.captureScreenshot", format="png", clip={"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT, "scale": 1})
    return text, Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
