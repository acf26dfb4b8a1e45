"""The runner's progress: one terminal line per finished step, and every event and log record in the log file.

:class:`EventStream` listens to the Dagster instance (what it stores is what the UI shows) and writes each
event to the log file and a line per finished step to the terminal; :func:`logging_to` sends Dagster's
python logging and warnings to the log file for the duration of the runs; :func:`bars_on_the_terminal` lets
the long steps draw their progress bars (:mod:`retrieval_pipeline.core.common.progress`) on the terminal.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import dagster as dg
from dagster import DagsterEvent, EventLogEntry

from retrieval_pipeline.cli.console import CHECK_FAILED_ERROR, StepResult, first_line, step_label
from retrieval_pipeline.core.common.progress import bars_on, is_terminal

LOG_FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
_STEP_END = {
    dg.DagsterEventType.STEP_SUCCESS: "ok",
    dg.DagsterEventType.STEP_FAILURE: "failed",
    dg.DagsterEventType.STEP_SKIPPED: "skipped",
}


@dataclass
class Plan:
    """The steps a run of the selection executes: ``{step key: (stage, asset names)}``."""

    steps: dict[str, tuple[str, list[str]]]

    @classmethod
    def of(cls, definitions: dg.Definitions, keys: Sequence[dg.AssetKey]) -> Plan:
        steps: dict[str, tuple[str, list[str]]] = {}
        for key in sorted(keys):
            assets_def = definitions.resolve_assets_def(key)
            stage, names = steps.setdefault(assets_def.node_def.name, (assets_def.group_names_by_key.get(key, ""), []))
            names.append(key.to_user_string())
        return cls(steps)

    @property
    def stage_width(self) -> int:
        """The stage column's width: the longest stage (asset group) of the plan, at least 10."""
        return max([10, *(len(stage) for stage, _ in self.steps.values())])

    @property
    def label_width(self) -> int:
        """The label column's width: the longest label of the plan, at least 44 and at most 76 (a longer one overflows)."""
        return min(76, max([44, *(len(self.label(step)[1]) for step in self.steps)]))

    def label(self, step_key: str) -> tuple[str, str]:
        """``(stage, label)``: the label is :func:`~retrieval_pipeline.cli.console.step_label`, the step key as the run
        page shows it, with the asset names where the key alone would not find them."""
        stage, names = self.steps.get(step_key, ("", [step_key]))
        return stage, step_label(step_key, names)


class EventStream:
    """Every event the instance stores for the current run: to the log file, and one terminal line per finished step.

    Registered with ``DagsterInstance.add_event_listener``, so it sees exactly what the instance records
    (what the UI shows), DEBUG events included, as they are stored.
    """

    def __init__(self, out: TextIO, log: logging.Handler) -> None:
        self.out = out
        self.log = log
        self.live = bool(getattr(out, "isatty", lambda: False)())
        self.plan = Plan({})
        self.steps: list[StepResult] = []
        self._started: dict[str, float] = {}

    def begin(self, plan: Plan) -> None:
        self.plan, self.steps, self._started = plan, [], {}

    def __call__(self, entry: EventLogEntry) -> None:
        try:
            self._write(entry)
            event = entry.dagster_event
            if event is None or not event.step_key:
                return
            if event.event_type == dg.DagsterEventType.STEP_START:
                self._started[event.step_key] = entry.timestamp
                if self.live:  # a transient line while the step runs, replaced by its result
                    stage, label = self.plan.label(event.step_key)
                    self.out.write(f"\r\x1b[K  {self._counter(len(self.steps) + 1)} {stage:<{self.plan.stage_width}} {label} ...")
                    self.out.flush()
            elif event.event_type in _STEP_END:
                self._finish(event, entry.timestamp)
        except Exception:  # never let the display break the run: an error here would fail the event write
            logging.getLogger("dagster").exception("retrieval_pipeline.cli.run: could not show an event")

    def _write(self, entry: EventLogEntry) -> None:
        """One line per event, as Dagster's console logger writes it, with the error's traceback when there is one."""
        event = entry.dagster_event
        parts = [entry.job_name, entry.run_id, entry.step_key, event.event_type.name if event else None, entry.message]
        message = " - ".join(str(p) for p in parts if p)
        error = entry.error_info or (event.step_failure_data.error if event and event.is_step_failure else None)
        if error is not None:
            message += "\n" + error.to_string()
        record = logging.LogRecord("dagster", int(entry.level), "", 0, message, None, None)
        record.created, record.msecs = entry.timestamp, (entry.timestamp % 1) * 1000
        self.log.handle(record)

    def _finish(self, event: DagsterEvent, at: float) -> None:
        step_key = event.step_key or ""
        stage, label = self.plan.label(step_key)
        status = _STEP_END[event.event_type]
        seconds = at - self._started.get(step_key, at)
        error = error_class = ""
        if event.is_step_failure and event.step_failure_data.error is not None:
            error, error_class = _error_text(event.step_failure_data.error), event.step_failure_data.error.cls_name or ""
        _, names = self.plan.steps.get(step_key, ("", [step_key]))
        self.steps.append(StepResult(step_key, stage, list(names), status, seconds, error, error_class))
        note = {"ok": f"{seconds:6.1f} s", "failed": f"{seconds:6.1f} s  FAILED", "skipped": "     -    skipped: an upstream step failed"}
        if error_class == CHECK_FAILED_ERROR:
            error = "a blocking ERROR check failed (see the summary)"
        line = note[status] + (f": {first_line(error)}" if error else "")
        prefix = "\r\x1b[K" if self.live else ""
        self.out.write(
            f"{prefix}  {self._counter(len(self.steps))} {stage:<{self.plan.stage_width}} {label:<{self.plan.label_width}} {line}\n"
        )
        self.out.flush()

    def _counter(self, n: int) -> str:
        total = len(self.plan.steps)
        return f"[{n:>{len(str(total))}}/{total}]"


@contextlib.contextmanager
def logging_to(path: Path) -> Iterator[logging.Handler]:
    """Send Dagster's python logging, library warnings and ``warnings`` to ``path`` (not the terminal) inside the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(logging.DEBUG)
    dagster_logger, root = logging.getLogger("dagster"), logging.getLogger()
    saved = (list(dagster_logger.handlers), dagster_logger.level, dagster_logger.propagate)
    dagster_logger.handlers, dagster_logger.propagate = [handler], False
    dagster_logger.setLevel(logging.DEBUG)
    root.addHandler(handler)  # root keeps its level: libraries' INFO chatter (and progress bars tied to it) stays off
    libraries = _own_handlers_to(handler)
    logging.captureWarnings(True)
    try:
        yield handler
    finally:
        logging.captureWarnings(False)
        for logger, handlers in libraries.items():
            logger.handlers = handlers
        root.removeHandler(handler)
        dagster_logger.handlers, dagster_logger.propagate = saved[0], saved[2]
        dagster_logger.setLevel(saved[1])
        handler.close()


#: Libraries whose logger writes to stderr through its own handler (not propagating to the root logger): transformers
#: prints its ``BertForSequenceClassification LOAD REPORT`` table (``classifier.weight | MISSING``) that way.
LIBRARY_LOGGERS = ("transformers", "sentence_transformers", "huggingface_hub")


def _own_handlers_to(handler: logging.Handler) -> dict[logging.Logger, list[logging.Handler]]:
    """Point the library loggers that keep their own stderr handler at ``handler``; returns their handlers to restore.

    transformers installs its stderr handler when its logging module is first used, so that module is set up here
    (when installed) before the handler is replaced; otherwise the first model load would add it back.
    """
    if importlib.util.find_spec("transformers") is not None:
        with contextlib.suppress(Exception):  # a broken install is the run's problem, not the log's
            importlib.import_module("transformers.utils.logging")._configure_library_root_logger()
    saved = {}
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.handlers:
            saved[logger] = list(logger.handlers)
            logger.handlers = [handler]
    return saved


@contextlib.contextmanager
def bars_on_the_terminal(stderr: TextIO | None = None) -> Iterator[None]:
    """The long steps' progress bars on ``stderr`` (default ``sys.stderr``) inside the block, when it is a terminal.

    Dagster pipes a step's stderr into its compute log, so the bars go to a duplicate of the terminal's
    descriptor, made here before any run starts; a stream without a descriptor is used as it is. Not a
    terminal: no bars (the steps' progress lines are in the log file).
    """
    stream = sys.stderr if stderr is None else stderr
    if not is_terminal(stream):
        yield
        return
    try:
        terminal: TextIO | None = os.fdopen(os.dup(stream.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor
        terminal = None
    try:
        with bars_on(terminal or stream):
            yield
    finally:
        if terminal is not None:
            terminal.close()


def quiet_progress_bars() -> None:
    """No Hugging Face progress bars (``Loading weights: 100%|...``) on the terminal: they would break the step lines."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when huggingface_hub and transformers are imported
    if "huggingface_hub" in sys.modules:  # already imported: switch them off where the flag was read
        importlib.import_module("huggingface_hub.utils").disable_progress_bars()
    if "transformers" in sys.modules:
        importlib.import_module("transformers.utils.logging").disable_progress_bar()


#: The wrappers Dagster puts around a step's own exception (the real message is their cause's).
_WRAPPER_ERRORS = {
    "DagsterExecutionStepExecutionError",
    "DagsterUserCodeExecutionError",
    "DagsterExecutionLoadInputError",  # 'Error occurred while loading input "corpus"': the cause says which and why
    "DagsterExecutionHandleOutputError",
}


def _error_text(error: Any) -> str:
    """A ``SerializableErrorInfo``'s message without the ``module.Class: `` prefix Dagster puts before it.

    ``Error occurred while executing op "raw_cases":`` says nothing: the exception the step raised is its
    cause (as the event log holds it), so the message shown is the innermost wrapped one's.
    """
    while error.cls_name in _WRAPPER_ERRORS and getattr(error, "cause", None) is not None:
        error = error.cause
    message = error.message.strip()
    head, sep, rest = message.partition(": ")
    return rest if sep and error.cls_name and head.split(".")[-1] == error.cls_name else message
