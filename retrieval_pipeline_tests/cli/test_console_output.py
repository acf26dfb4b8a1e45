"""``make run``'s terminal: library load reports go to the log file, and a 0-column terminal still gets its bars."""

from __future__ import annotations

import logging
import os
import select
from pathlib import Path

import pytest

from retrieval_pipeline.cli.progress import logging_to
from retrieval_pipeline.core.common.progress import Progress, terminal_columns


def test_transformers_load_report_goes_to_the_log_file_not_the_terminal(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """transformers logs ``BertForSequenceClassification LOAD REPORT`` (``classifier.weight | MISSING``) through its own
    stderr handler, which does not propagate to the root logger the run log listens on."""
    tlogging = pytest.importorskip("transformers.utils.logging")
    log = tmp_path / "run.log"
    with logging_to(log):
        tlogging.get_logger("transformers.utils.loading_report").warning(
            "BertForSequenceClassification LOAD REPORT\nclassifier.weight | MISSING"
        )
        logging.getLogger("sentence_transformers.cross_encoder").warning("a library warning")
    _, err = capfd.readouterr()
    assert "LOAD REPORT" not in err and "library warning" not in err
    text = log.read_text()
    assert "LOAD REPORT" in text and "classifier.weight | MISSING" in text
    after = logging.getLogger("transformers").handlers
    assert after and all(not isinstance(h, logging.FileHandler) for h in after)  # restored after the block


def _read_all(fd: int) -> str:
    chunks = []
    while select.select([fd], [], [], 0.2)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def test_a_terminal_of_zero_columns_still_gets_a_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new pseudo-terminal reports 0 columns, as some CI runners' do: tqdm's own width would be 0, no meter at all."""
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = os.openpty()
    try:
        stream = os.fdopen(slave, "w", buffering=1, encoding="utf-8")
        assert os.get_terminal_size(slave).columns == 0
        assert terminal_columns(stream) == 80
        with Progress("bm25", verb="indexed", noun="documents", unit="docs", stream=stream, bar=True) as progress:
            progress(5, 10)
            stream.flush()
            drawn = _read_all(master)
        assert "bm25:" in drawn and "5/10" in drawn and "█" in drawn  # the meter is drawn
        monkeypatch.setenv("COLUMNS", "120")
        assert terminal_columns(stream) == 120
    finally:
        os.close(master)
        stream.close()


def test_the_summary_names_a_failed_step_as_the_run_page_does_with_its_asset() -> None:
    """The summary's "failed step" line starts with the step key the run page shows, then the asset's own name where
    the key alone would not find it (a '.' Dagster's op names do not allow); a plain key stands alone."""
    from retrieval_pipeline.cli.console import DatasetRun, StepResult, format_summary

    steps = [
        StepResult(
            "retrievers__hybrid_minmax_a0_5_index", "retrievers_hybrid", ["retrievers/hybrid_minmax_a0.5_index"], "failed", 1.0, "boom"
        ),
        StepResult("retrievers__bm25_index", "retrievers_bm25", ["retrievers/bm25_index"], "failed", 1.0, "bang"),
    ]
    run = DatasetRun("stdlib", "r" * 36, False, 2.0, steps, [], None, Path("/nonexistent"))
    text = format_summary([run], Path("/nonexistent/run.log"))
    assert "failed step retrievers__hybrid_minmax_a0_5_index (retrievers/hybrid_minmax_a0.5_index): boom" in text
    assert "failed step retrievers__bm25_index: bang" in text
