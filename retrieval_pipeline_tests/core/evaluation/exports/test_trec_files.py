"""Reading TREC files as other tools write them, and refusing files that are not TREC files (issues 37 and 39).

Bounded, regular-file reading: a FIFO, a device, a folder, an oversized file or an endless line is refused with
one line naming the file, before anything unbounded is read; gzip is recognised by its magic bytes.
"""

from __future__ import annotations

import gzip
import os
import threading
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.evaluation.exports import trec
from retrieval_pipeline.core.evaluation.exports.trec import MAX_TREC_BYTES_ENV, MAX_TREC_LINE_BYTES, read_trec_qrels, read_trec_run

RUN = "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n"


def test_gzip_run_and_qrels_are_read_by_magic_bytes_whatever_the_name(tmp_path: Path) -> None:
    run, qrels = tmp_path / "run.txt", tmp_path / "qrels"  # no .gz in either name
    run.write_bytes(gzip.compress(RUN.encode()))
    qrels.write_bytes(gzip.compress(b"q1 0 d1 1\n"))
    assert read_trec_run(run) == {"q1": [("d1", 2.0), ("d2", 1.0)]}
    assert read_trec_qrels(qrels) == {"q1": {"d1": 1}}


def test_a_plain_file_named_gz_is_read_as_text(tmp_path: Path) -> None:
    path = tmp_path / "run.gz"
    path.write_text(RUN)
    assert read_trec_run(path)["q1"][0] == ("d1", 2.0)


def test_a_broken_gzip_file_is_one_input_error(tmp_path: Path) -> None:
    path = tmp_path / "run.gz"
    path.write_bytes(gzip.compress(RUN.encode())[:-12])
    with pytest.raises(InputError, match="cannot read file"):
        read_trec_run(path)


def test_three_column_qrels(tmp_path: Path) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text("q1 d1 2\nq1 d2 0\nq2 0 d3 1\n")  # three columns, and trec_eval's four may follow
    assert read_trec_qrels(path) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}


def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    result: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(result, read_trec_run, fifo), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(result[0], InputError) and "is a FIFO: refused, not read" in str(result[0]) and str(fifo) in str(result[0])


def _catch(into: list[BaseException], function, *args) -> None:  # noqa: ANN001
    try:
        function(*args)
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        into.append(exc)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused(device: str) -> None:
    with pytest.raises(InputError, match="not a regular file: refused, not read"):
        read_trec_run(device)


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder"):
        read_trec_qrels(tmp_path)


def test_an_endless_line_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    path.write_bytes(b"q1 Q0 " + b"d" * (8 * MAX_TREC_LINE_BYTES))
    with pytest.raises(InputError, match=f"line 1 is longer than {MAX_TREC_LINE_BYTES:,} bytes"):
        read_trec_run(path)


def test_the_size_is_checked_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.trec"
    path.write_text(RUN * 10)
    monkeypatch.setenv(MAX_TREC_BYTES_ENV, "100")
    with pytest.raises(InputError, match=f"over the limit of 100 bytes \\(set {MAX_TREC_BYTES_ENV}"):
        read_trec_run(path)


def test_a_gzip_bomb_is_bounded_by_its_decompressed_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bomb.gz"
    text = "".join(f"q{i} Q0 d{i} 1 1.0 t\n" for i in range(60_000))  # ~1.3 MB of text in a few hundred kB
    path.write_bytes(gzip.compress(text.encode()))
    monkeypatch.setenv(MAX_TREC_BYTES_ENV, str(800_000))
    assert path.stat().st_size < 800_000
    with pytest.raises(InputError, match="once decompressed"):
        read_trec_run(path)


def test_the_limit_defaults_to_4_gib_and_ignores_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_TREC_BYTES_ENV, "lots")
    assert trec.max_trec_bytes() == trec.DEFAULT_MAX_TREC_BYTES == 4 * 1024**3


def test_the_bulk_run_reader_refuses_and_bounds_as_the_line_reader_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_trec_run_scores`` (the API's fast path) goes through the same checks: a FIFO is refused without blocking,
    a device is refused, an endless line is named by line, the size is checked first, and gzip is read by magic bytes."""
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    result: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(result, trec.read_trec_run_scores, fifo), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert isinstance(result[0], InputError) and "is a FIFO: refused, not read" in str(result[0])
    with pytest.raises(InputError, match="not a regular file: refused, not read"):
        trec.read_trec_run_scores("/dev/zero")
    endless = tmp_path / "endless.trec"
    endless.write_bytes(RUN.encode() + b"q1 Q0 " + b"d" * (8 * MAX_TREC_LINE_BYTES))
    with pytest.raises(InputError, match=f"line 3 is longer than {MAX_TREC_LINE_BYTES:,} bytes"):
        trec.read_trec_run_scores(endless)
    packed = tmp_path / "run.txt"
    packed.write_bytes(gzip.compress(RUN.encode()))
    assert trec.read_trec_run_scores(packed) == {"q1": {"d1": 2.0, "d2": 1.0}}
    monkeypatch.setenv(MAX_TREC_BYTES_ENV, "10")
    with pytest.raises(InputError, match="over the limit of 10 bytes"):
        trec.read_trec_run_scores(packed)
