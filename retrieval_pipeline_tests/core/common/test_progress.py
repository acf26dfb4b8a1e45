"""Progress of the long steps: a tqdm bar on a terminal only, lines through the active emit, an ETA without the start.

Each of the five long steps (embedding, introspection, the BM25 build, verification, LLM calls) is run on
fakes or tiny inputs inside :func:`progress_to`, and its last line must name its total.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel
from tqdm import tqdm

from retrieval_pipeline.cli.progress import bars_on_the_terminal
from retrieval_pipeline.core.common.progress import Progress, progress_to
from retrieval_pipeline.core.common.types import Case
from retrieval_pipeline.core.datasets.known_item.corpus import IntrospectionSettings, introspect_in_children
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_bm25 import BM25Retriever
from retrieval_pipeline.core.retrieval.engines.bm25.okapi_index import TOKENIZE_CHUNK
from retrieval_pipeline.core.retrieval.kinds.dense import DenseSpec
from retrieval_pipeline.core.services.llm.client import LLMClient, LLMSettings
from retrieval_pipeline.core.verifier import verify as verify_module
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex
from retrieval_pipeline_tests.core.retrieval.kit import build, fake_model_folder, parse_as
from retrieval_pipeline_tests.fakes.encoders import KeywordEncoder


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal (and has no file descriptor, as a test's stream)."""

    def isatty(self) -> bool:
        return True


class Ticks:
    """A clock that returns the given times in turn."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


# -- the bar -------------------------------------------------------------------------------------


def test_the_bar_is_drawn_on_a_terminal_and_not_otherwise() -> None:
    terminal, pipe = FakeTerminal(), io.StringIO()
    on_terminal = Progress("dense_t", stream=terminal, total=100)
    on_pipe = Progress("dense_t", stream=pipe, total=100)
    for progress in (on_terminal, on_pipe):
        progress.advance(10)
        assert (progress.bar is not None) is (progress is on_terminal)
        progress.advance(90)
    assert "dense_t" in terminal.getvalue() and "\r" in terminal.getvalue()
    assert pipe.getvalue() == "" and on_terminal.bar is None  # the last report closed (and cleared) the bar
    forced, never = io.StringIO(), FakeTerminal()
    Progress("x", stream=forced, bar=True, total=4).advance()
    Progress("x", stream=never, bar=False, total=4).advance()
    assert "x:" in forced.getvalue() and never.getvalue() == ""


def test_the_runner_hands_its_terminal_to_the_steps() -> None:
    terminal = FakeTerminal()
    with bars_on_the_terminal(terminal):
        inside = Progress("step", total=10)  # no stream given: the runner's terminal
        inside.advance()
    outside = Progress("step", stream=io.StringIO(), total=10)
    with bars_on_the_terminal(io.StringIO()):  # not a terminal: no bars
        piped = Progress("step", total=10, stream=None)
    assert inside.stream is terminal and "step" in terminal.getvalue()
    assert outside.stream is None and piped.stream is not terminal
    inside.close()


# -- the ETA -------------------------------------------------------------------------------------


def test_the_eta_leaves_out_the_time_before_the_first_report() -> None:
    """A model that loads for 40 s, then embeds 200 texts in 10 s: 20 texts/s, so 700 left take 35 s (not 117 s)."""
    lines: list[str] = []
    progress = Progress("dense_t", emit=lines.append, every_seconds=0.0, clock=Ticks(0.0, 40.0, 50.0, 85.0))
    progress(100, 1000)  # the first shard, after the load
    progress(300, 1000)
    progress(1000, 1000)
    assert lines[0] == "dense_t: embedded 100 / 1,000 new texts (10.0%), the first after 40 s"
    assert lines[1] == "dense_t: embedded 300 / 1,000 new texts (30.0%), 20 texts/s, ETA 35 s"
    assert lines[2].endswith("(100.0%), 20 texts/s, done in 2 min")  # 900 texts in 45 s; the whole step took 85 s
    slow = Progress("verifier", verb="verified", noun="questions", unit="questions", emit=lines.append, clock=Ticks(0.0, 5.0, 25.0))
    slow(1, 20)
    slow(8, 20)
    assert lines[-1].endswith("(40.0%), 0.35 questions/s, ETA 35 s")  # 7 questions in 20 s; 12 left


def test_no_eta_is_given_from_too_few_units() -> None:
    """88 questions verified in parallel: the first after 60 s, the second 60 s later (a slow one), then a burst. Two
    units gave "ETA 86 min" for a run that ended 20 s later; the ETA waits for 5 units (5% of 88) past the first."""
    lines: list[str] = []
    progress = Progress("verifier", verb="verified", noun="questions", unit="questions", emit=lines.append, every_seconds=0.0,
                        clock=Ticks(0.0, 60.0, 120.0, 125.0, 130.0))  # fmt: skip
    progress(1, 88)
    progress(2, 88)
    progress(5, 88)
    progress(40, 88)
    assert lines[1].endswith("(2.3%), ETA estimating") and lines[2].endswith("(5.7%), ETA estimating")
    assert lines[3].endswith("0.56 questions/s, ETA 2 min")  # 39 questions in 70 s; 48 left take 86 s


def test_the_bar_counts_its_rate_from_the_first_report() -> None:
    progress = Progress("dense_t", stream=FakeTerminal(), total=1000)
    progress(100, 1000)
    progress(300, 1000)
    assert progress.bar is not None
    meter = progress.bar.format_dict
    assert (meter["initial"], meter["n"], meter["total"]) == (100, 300, 1000)
    # tqdm's own rate is (n - initial) / elapsed: 200 texts in 10 s leave 700 for 35 s
    assert "00:35" in tqdm.format_meter(**{**meter, "elapsed": 10.0, "rate": None})
    progress.close()


# -- where the lines go --------------------------------------------------------------------------


def test_lines_go_to_the_active_emit_and_a_step_of_one_unit_says_nothing() -> None:
    lines: list[str] = []
    with progress_to(lines.append):
        Progress("a", verb="did", noun="things", unit="things", total=2).advance(2)
        Progress("b", total=1).advance()
        Progress("c", emit=lambda line: lines.append("own: " + line), total=3).advance(3)
    Progress("d", total=5).advance(5)  # no emit active: nowhere
    assert [line.split(",")[0] for line in lines] == ["a: did 2 / 2 things (100.0%)", "own: c: embedded 3 / 3 new texts (100.0%)"]


# -- each long step reports its total -------------------------------------------------------------


def test_embedding_reports_its_total(tmp_path: Path) -> None:
    spec = parse_as(DenseSpec, "dense_toy", {"kind": "dense", "model": {"path": str(fake_model_folder(tmp_path / "model"))}})
    lines: list[str] = []
    with progress_to(lines.append):
        build(spec, tmp_path, lambda _spec: KeywordEncoder(["cat", "dog"]))  # no log of its own: the active emit
    assert lines[0].startswith("dense_toy: embedded 5 / 5 new texts (100.0%)")


def test_the_bm25_build_reports_its_total() -> None:
    n = 2 * TOKENIZE_CHUNK + 7
    lines: list[str] = []
    with progress_to(lines.append):
        BM25Retriever.build([f"d{i}" for i in range(n)], [f"word{i % 97} common" for i in range(n)])
    assert lines[0].startswith(f"BM25 index: tokenized {TOKENIZE_CHUNK:,} / {n:,} documents")
    assert lines[-1].startswith(f"BM25 index: tokenized {n:,} / {n:,} documents (100.0%)")


def test_introspection_reports_its_total() -> None:
    """Two package groups (the standard library's modules are one): a line per finished group, the last naming 2."""
    lines: list[str] = []
    with progress_to(lines.append):
        introspect_in_children(IntrospectionSettings(include=("colorsys", "tabulate"), min_documents=1), label="tiny")
    assert lines[-1].startswith("tiny: introspected 2 / 2 package groups (100.0%)")


def test_verification_reports_its_total(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify_module, "verify_question", lambda case_id, *args, **kwargs: SimpleNamespace(case_id=case_id, reused=False))
    cases = [
        Case(f"q:{i}", "mc", "multiple_choice", "mc.yaml", i, "Which?", options={"A": "a", "B": "b"}, correct_answer="A") for i in range(3)
    ]
    index = LibraryIndex(import_name=None, distribution=None, version=None, python_version="3", python="python")
    lines: list[str] = []
    with progress_to(lines.append):
        run = verify_module.run_verification(cases, index=index, cache=None, parallel=2)
    assert [v.case_id for v in run.verdicts] == ["q:0", "q:1", "q:2"]
    assert lines[-1].startswith("verifier: verified 3 / 3 questions (100.0%)")


class Answer(BaseModel):
    answer: str


def test_llm_calls_report_their_total() -> None:
    def create(**kwargs):
        content = json.dumps({"answer": kwargs["messages"][-1]["content"]})
        choice = SimpleNamespace(message=SimpleNamespace(content=content), finish_reason="stop")
        return SimpleNamespace(choices=[choice], usage=SimpleNamespace(prompt_tokens=1, completion_tokens=1))

    fake = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)), close=lambda: None)
    client = LLMClient(LLMSettings(base_url="http://127.0.0.1:9", model="fake"), client=fake)
    lines: list[str] = []
    with progress_to(lines.append):
        calls = client.map_json([([{"role": "user", "content": f"q{i}"}], Answer) for i in range(4)])
    assert [c.value for c in calls] == [{"answer": f"q{i}"} for i in range(4)]
    assert lines[-1].startswith("llm:fake: answered 4 / 4 requests (100.0%)")
