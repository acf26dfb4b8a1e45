"""Read TREC run and qrels files (written by :mod:`.trec_writer`, or by any reference tool).

Formats (whitespace-separated, one judgement or hit per line)::

    run:    <query_id> Q0 <doc_id> <rank> <score> <tag>
    qrels:  <query_id> 0 <doc_id> <grade>

:func:`read_trec_run` orders each query by score descending and breaks ties by doc id descending, as
trec_eval does, so it returns the ranking reference tools evaluate; for files :mod:`.trec_writer` wrote that is the
original list order.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.paths import PathRefused
from retrieval_pipeline.core.common.types import Hit, Qrels, Run
from retrieval_pipeline.core.evaluation.metrics.judging import FlatScores, lists_a_doc_twice

V = TypeVar("V", int, float)

#: Default size limit of a TREC file, in bytes (after gzip decompression too).
DEFAULT_MAX_TREC_BYTES = 4 * 1024**3
#: Environment variable that overrides :data:`DEFAULT_MAX_TREC_BYTES`.
MAX_TREC_BYTES_ENV = "RETRIEVAL_PIPELINE_MAX_TREC_BYTES"
#: Longest line accepted, in bytes (a TREC line is six short fields; an endless line is refused here).
MAX_TREC_LINE_BYTES = 64 * 1024
#: Bytes read at a time when a TREC file is read whole.
READ_PIECE_BYTES = 16 * 1024**2
#: The first two bytes of every gzip stream (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"


def read_trec_run(path: str | Path) -> Run:
    """Read a TREC run file (6 fields a line) into a Run, ranked the way trec_eval ranks it.

    Each query's hits are ordered by score descending, ties by doc id descending (trec_eval's rule); the
    rank column is checked to be an integer and otherwise ignored, as reference tools do.

    Args:
        path: The run file.

    Returns:
        ``{query_id: [(doc_id, score), ...]}``, best first, queries in first-seen order.

    Raises:
        InputError: Naming file and line: wrong field count, a rank that is not an integer, a score that
            is not a finite number, or a doc id listed twice for a query.
    """
    return {query_id: _trec_eval_order(hits) for query_id, hits in read_trec_run_scores(path).items()}


def read_trec_run_scores(path: str | Path) -> dict[str, dict[str, float]]:
    """Read a TREC run file into ``{query_id: {doc_id: score}}`` (file order), checked as :func:`read_trec_run` checks it.

    A well-formed plain-text file whose queries each sit on consecutive lines is read in bulk (C-level
    splits and conversions, no per-line Python); anything else is read line by line, which names the
    file and line of the first problem.

    Raises:
        InputError: As :func:`read_trec_run`.
    """
    path = Path(path)
    fast = _bulk_run_scores(path)
    return fast if fast is not None else _line_run_scores(path)


def read_trec_run_for_judging(path: str | Path) -> FlatScores | dict[str, dict[str, float]]:
    """A TREC run file as flat arrays when :func:`read_trec_run_flat` can take it, else as :func:`read_trec_run_scores`
    reads it (the same errors); the file is read once either way. What ``evaluate`` and ``compare`` read a path with.

    Raises:
        InputError: As :func:`read_trec_run`.
    """
    path = Path(path)
    data = _run_bytes(path)
    if data is not None:
        flat = _flat_scores(data)
        if flat is not None:
            return flat
        fast = _bulk_scores(data)
        if fast is not None:
            return fast
    return _line_run_scores(path)


def _line_run_scores(path: Path) -> dict[str, dict[str, float]]:
    """The line reader: every line checked, the first problem named by file and line."""
    scores: dict[str, dict[str, float]] = {}
    for number, fields in _records(path, 6, "query_id Q0 doc_id rank score tag"):
        query_id, _, doc_id, rank, score, _ = fields
        _parse_int(rank, "rank", path, number)
        value = _parse_score(score, path, number)
        _add_once(scores.setdefault(query_id, {}), query_id, doc_id, value, path, number)
    return scores


def _bulk_run_scores(path: Path) -> dict[str, dict[str, float]] | None:
    """The run read by pandas' C tokenizer, or None when the file is not plain, well-formed text with contiguous queries.

    Only what the line reader would accept the same way comes back: 6 fields on every line, integer ranks
    (digits only), finite scores (parsed exactly, as ``float`` parses them), each query on consecutive lines,
    no doc id twice; anything else is left to the line reader.
    """
    data = _run_bytes(path)
    return None if data is None else _bulk_scores(data)


def _run_bytes(path: Path) -> bytes | None:
    """The file's bytes (gunzipped), or None when it cannot be read whole: the line reader then names the problem."""
    try:
        handle = open_trec(path)  # regular files only, size-bounded, gunzipped: refusals as the line reader's
    except OSError:
        return None  # missing or unreadable: the line reader's InputError names the file
    with handle:
        try:
            return handle.read()
        except (OSError, EOFError, zlib.error):
            return None  # a broken gzip stream: the line reader says where


def _has_long_line(data: bytes) -> bool:
    """Whether a line of ``data`` is over :data:`MAX_TREC_LINE_BYTES` (the line reader names it)."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    return bool(len(data)) and int(np.diff(ends, prepend=-1, append=len(data)).max()) > MAX_TREC_LINE_BYTES + 1


def _bulk_scores(data: bytes) -> dict[str, dict[str, float]] | None:
    """:func:`_bulk_run_scores` of the file's bytes: pyarrow's reader first, then pandas'."""
    import pandas as pd

    single_spaced = _arrow_run_scores(data)
    if single_spaced is not None:
        return single_spaced
    if _has_long_line(data):
        return None  # a line over the limit: the line reader names it
    if _OTHER_SPACES_ASCII.search(data) or (not data.isascii() and _OTHER_SPACES.search(data.decode("utf-8", errors="replace"))):
        return None  # a separator str.split sees and pandas' tokenizer does not: the line reader splits it
    try:
        frame = pd.read_csv(
            io.BytesIO(data), sep=r"\s+", header=None, engine="c", quoting=csv.QUOTE_NONE, na_filter=False, encoding="utf-8",
            dtype={0: object, 1: object, 2: object, 3: object, 4: np.float64, 5: object},  # object: no Arrow strings to build
        )  # fmt: skip
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None
    if frame.shape[1] != 6 or frame[5].isna().any() or (frame[5] == "").any() or not frame[3].str.fullmatch(r"[0-9]+").all():
        return None
    scores = frame[4].to_numpy()
    if not np.isfinite(scores).all():
        return None
    queries, doc_ids, values = frame[0].to_numpy(), frame[2].tolist(), scores.tolist()
    starts = [0, *(np.flatnonzero(queries[1:] != queries[:-1]) + 1).tolist(), len(queries)]
    run = {queries[a]: dict(zip(doc_ids[a:b], values[a:b])) for a, b in zip(starts, starts[1:])}
    if len(run) != len(starts) - 1 or sum(map(len, run.values())) != len(queries):
        return None  # a query on lines apart, or a doc listed twice: the line reader says where
    return run


#: Whitespace that ``str.split`` (the line reader) splits at and pandas' ``\s+`` tokenizer does not (it splits at spaces
#: and tabs, and ends lines at ``\r`` and ``\n``): ASCII's vertical tab, form feed and separators, and Unicode's spaces.
_OTHER_SPACES_ASCII = re.compile(rb"[\x0b\x0c\x1c-\x1f]")
_OTHER_SPACES = re.compile(r"[^\S \t\r\n]")
#: The bytes of a file :func:`_arrow_run_scores` reads: printable ASCII and the newline (so a single space is the only
#: separator ``str.split`` would see: no tab, carriage return, form feed or non-ASCII space).
_SINGLE_SPACED_BYTES = bytes(range(0x20, 0x7F)) + b"\n"


def _arrow_run_table(data: bytes) -> tuple[Any, np.ndarray, Any] | None:
    """The run read by pyarrow's CSV reader (single spaces between fields): ``(table, scores, dictionary-encoded query
    ids)``, or None when it cannot read it that way.

    Taken only for printable ASCII with one space between fields and six fields on every line (the first line's count
    is checked, and pyarrow refuses a line of another; a double, leading or trailing space makes an empty field,
    another count), lines within the bound, digit-only ranks and finite scores, each query on consecutive lines. pyarrow
    parses the scores correctly rounded, as ``float`` does. Anything else is left to the callers' other readers.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv

    if not data or data.translate(None, _SINGLE_SPACED_BYTES) or data[: data.find(b"\n")].count(b" ") != 5:
        return None  # other bytes, or a first line of other than six fields (pyarrow holds every line to the first's count)
    if _has_long_line(data):
        return None  # a long line: the line reader names it
    try:
        table = pa_csv.read_csv(
            io.BytesIO(data),
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True, use_threads=False),
            parse_options=pa_csv.ParseOptions(delimiter=" ", quote_char=False, escape_char=False, ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict.fromkeys(map("f{}".format, range(6)), pa.string()),
                null_values=[],
                include_columns=["f0", "f2", "f3", "f4"],  # Q0 and the tag are read (six fields a line) and not kept
            ),
        )
        if table.num_rows == 0 or not pc.all(pc.ascii_is_decimal(table.column("f3"))).as_py():
            return None  # a rank not digits only: the others decide
        scores = pc.cast(table.column("f4"), pa.float64()).to_numpy()
    except (pa.ArrowInvalid, ValueError):
        return None
    if not np.isfinite(scores).all():
        return None
    queries = pc.dictionary_encode(table.column("f0")).combine_chunks()
    if len(queries.dictionary) != 1 + np.count_nonzero(np.diff(queries.indices.to_numpy())):
        return None  # a query on lines apart: the line reader says where
    return table, scores, queries


def _query_starts(queries: Any, rows: int) -> np.ndarray:
    """``(queries + 1,)`` row offsets of each query's consecutive lines."""
    return np.concatenate(([0], np.flatnonzero(np.diff(queries.indices.to_numpy())) + 1, [rows])).astype(np.int64)


def _arrow_run_scores(data: bytes) -> dict[str, dict[str, float]] | None:
    """The run as ``{query_id: {doc_id: score}}`` through :func:`_arrow_run_table`; None as it, or for a doc listed twice."""
    read = _arrow_run_table(data)
    if read is None:
        return None
    table, scores, queries = read
    starts = _query_starts(queries, table.num_rows).tolist()
    doc_ids, values = table.column("f2").to_pylist(), scores.tolist()
    run = {q: dict(zip(doc_ids[a:b], values[a:b])) for q, a, b in zip(queries.dictionary.to_pylist(), starts, starts[1:])}
    if sum(map(len, run.values())) != table.num_rows:
        return None  # a doc listed twice: the line reader says where
    return run


def read_trec_run_flat(path: str | Path) -> FlatScores | None:
    """A TREC run file as :class:`~retrieval_pipeline.core.evaluation.metrics.judging.FlatScores`, or None.

    The same file, checks and numbers as :func:`read_trec_run_scores`, without a Python dict per query. None when the
    file is not the single-spaced, well-formed text of :func:`_arrow_run_table` or lists a doc twice for a query
    (:func:`read_trec_run_for_judging` then reads it as :func:`read_trec_run_scores` does).
    """
    data = _run_bytes(Path(path))
    return None if data is None else _flat_scores(data)


def _flat_scores(data: bytes) -> FlatScores | None:
    """:func:`read_trec_run_flat` of the file's bytes."""
    import pyarrow.compute as pc

    read = _arrow_run_table(data)
    if read is None:
        return None
    table, scores, queries = read
    docs = pc.dictionary_encode(table.column("f2")).combine_chunks()
    starts, doc_index = _query_starts(queries, table.num_rows), docs.indices.to_numpy()
    if lists_a_doc_twice(starts, doc_index, len(docs.dictionary)):
        return None
    return FlatScores(queries.dictionary.to_pylist(), starts, doc_index, docs.dictionary.to_pylist(), scores)


def _trec_eval_order(hits: dict[str, float]) -> list[Hit]:
    """Hits by score descending, ties by doc id descending (trec_eval's ``get_trec_results.c`` rule)."""
    return sorted(hits.items(), key=lambda hit: (hit[1], hit[0]), reverse=True)


def read_trec_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file (``query_id iteration doc_id grade``, or ``query_id doc_id grade``) into Qrels.

    A line of three fields is ``query_id doc_id grade`` (the layout without trec_eval's unused
    iteration column that some tools write); four fields are trec_eval's layout.

    Args:
        path: The qrels file.

    Returns:
        ``{query_id: {doc_id: grade}}`` in file order.

    Raises:
        InputError: Naming file and line: wrong field count, a non-integer grade, or a repeated pair.
    """
    path = Path(path)
    qrels: Qrels = {}
    for number, fields in _records(path, (4, 3), "query_id 0 doc_id grade, or query_id doc_id grade"):
        query_id, doc_id, grade = (fields[0], fields[2], fields[3]) if len(fields) == 4 else fields
        value = _parse_int(grade, "grade", path, number)
        _add_once(qrels.setdefault(query_id, {}), query_id, doc_id, value, path, number)
    return qrels


def max_trec_bytes() -> int:
    """The size limit: ``RETRIEVAL_PIPELINE_MAX_TREC_BYTES`` when set to a positive integer, else 4 GiB."""
    value = os.environ.get(MAX_TREC_BYTES_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_TREC_BYTES


def _records(path: Path, n_fields: int | tuple[int, ...], layout: str) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(1-based line, fields)`` of each non-blank line, checking the field count (one of ``n_fields``)."""
    allowed = (n_fields,) if isinstance(n_fields, int) else n_fields
    expected = " or ".join(map(str, allowed))
    try:
        with open_trec(path) as handle:
            for number, line in _bounded_lines(handle, path):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) not in allowed:
                    message = f"line {number}: expected {expected} fields ({layout}), got {len(fields)}"
                    raise InputError(message, path=str(path))
                yield number, fields
    except (OSError, EOFError, zlib.error) as error:  # gzip.BadGzipFile is an OSError
        raise InputError(f"cannot read file: {error}", path=str(path)) from error


def open_trec(path: str | Path) -> BinaryIO:
    """A TREC file opened for reading bytes: a regular file, within :func:`max_trec_bytes`, gunzipped when gzip.

    The path is checked before it is opened (``os.stat``): a FIFO, a device (``/dev/zero``), a socket or a
    folder is refused without an ``open`` that could block; the file is then opened non-blocking and checked
    again (it may have been swapped in between). Gzip is recognised by its magic bytes, whatever the name
    (Anserini's ``.run.gz``, ir_datasets' ``qrels`` caches), and its decompressed size is bounded too.

    Raises:
        PathRefused: Not a regular file, or larger than the limit (one line naming the file).
        OSError: Missing or unreadable.
    """
    path = Path(path)
    limit = max_trec_bytes()
    _check_regular(os.stat(path), path, limit)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    raw = os.fdopen(fd, "rb")
    try:
        _check_regular(os.fstat(fd), path, limit)
        os.set_blocking(fd, True)
        if raw.read(2) == GZIP_MAGIC:
            raw.seek(0)
            return _Bounded(gzip.GzipFile(fileobj=raw, mode="rb"), raw, path, limit)  # type: ignore[return-value]
        raw.seek(0)
        return _Bounded(raw, raw, path, limit)  # type: ignore[return-value]
    except BaseException:
        raw.close()
        raise


def _check_regular(info: os.stat_result, path: Path, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
        raise PathRefused(f"TREC file is {kind}: refused, not read (give a regular file)", path=str(path))
    if info.st_size > limit:
        raise PathRefused(
            f"TREC file is {info.st_size:,} bytes, over the limit of {limit:,} bytes (set {MAX_TREC_BYTES_ENV} to raise it): refused, not read",
            path=str(path),
        )


class _Bounded(io.RawIOBase):
    """Reads of ``inner`` (a file or its gzip stream) that fail past ``limit`` bytes; closing closes both."""

    def __init__(self, inner: BinaryIO, raw: BinaryIO, path: Path, limit: int) -> None:
        self.inner, self.raw, self.path, self.limit, self.done = inner, raw, path, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        data = self._counted(self.inner.read(len(buffer)))
        buffer[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        """Everything left, within the limit: a plain file's known size in one read, then (a gzip stream, or a file
        that grew) 16 MiB pieces (``RawIOBase.readall`` reads 8 KiB at a time)."""
        pieces = []
        if self.inner is self.raw:
            size = os.fstat(self.raw.fileno()).st_size - self.raw.tell()
            if 0 < size <= self.limit - self.done:
                pieces.append(self._counted(self.inner.read(size)))
        while data := self._counted(self.inner.read(READ_PIECE_BYTES)):
            pieces.append(data)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _counted(self, data: bytes) -> bytes:
        """``data``, counted against the limit (refused past it)."""
        self.done += len(data)
        if self.done > self.limit:
            raise PathRefused(
                f"TREC file holds over {self.limit:,} bytes once decompressed (set {MAX_TREC_BYTES_ENV} to raise it): refused",
                path=str(self.path),
            )
        return data

    def close(self) -> None:
        try:
            if self.inner is not self.raw:
                self.inner.close()
            self.raw.close()
        finally:
            super().close()


def _bounded_lines(handle: BinaryIO, path: Path) -> Iterator[tuple[int, str]]:
    """``(1-based number, text)`` of each line, each at most :data:`MAX_TREC_LINE_BYTES` bytes, decoded as UTF-8."""
    buffered = io.BufferedReader(handle)  # type: ignore[arg-type]
    number = 0
    while True:
        line = buffered.readline(MAX_TREC_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_TREC_LINE_BYTES:
            raise InputError(
                f"line {number} is longer than {MAX_TREC_LINE_BYTES:,} bytes (a TREC line is a few short fields): refused", path=str(path)
            )
        try:
            yield number, line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"line {number}: not UTF-8 text ({error.reason} at byte {error.start})", path=str(path)) from error


def _parse_int(text: str, what: str, path: Path, number: int) -> int:
    try:
        return int(text)
    except ValueError as error:
        raise InputError(f"line {number}: {what} {text!r} is not an integer", path=str(path)) from error


def _parse_score(text: str, path: Path, number: int) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise InputError(f"line {number}: score {text!r} is not a number", path=str(path)) from error
    if not math.isfinite(value):
        raise InputError(f"line {number}: score {text!r} is not finite", path=str(path))
    return value


def _add_once(target: dict[str, V], query_id: str, doc_id: str, value: V, path: Path, number: int) -> None:
    """Set ``target[doc_id]``; raises naming the line when the doc is already there for the query."""
    if doc_id in target:
        raise InputError(f"line {number}: doc id {doc_id!r} appears twice for query {query_id!r}", path=str(path))
    target[doc_id] = value
