"""Natural Questions CSV: validation messages, sampling, dedup, chunk shape, cases and qrels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.datasets.nq.reader import (
    NQ_DOCUMENT_ID,
    dedupe_chunks,
    load_nq_csv,
    normalise_whitespace,
    nq_cases,
    nq_documents,
    nq_qrels,
    split_short_answers,
    write_chunks_json,
)

HEADER = "question,long_answer,short_answer\n"
PROJECT_ROOT = Path(__file__).resolve().parents[4]
SAMPLE_CSV = PROJECT_ROOT / "data" / "samples" / "nq" / "nq_sample.csv"


def write(tmp_path: Path, text: str | bytes, name: str = "nq.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


# -- loading ---------------------------------------------------------------------------------------


def test_rows_ids_short_answers_and_multiline_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + 'who made python,"Guido van Rossum\nmade it.",Guido van Rossum | Guido\nwhen,"In 1991.",\n',
    )
    load = load_nq_csv(path)
    assert load.total == 2 and not load.rejects
    first, second = load.rows
    assert (first.question_id, first.row_number, first.index) == ("nq_q000000", 2, 0)
    assert first.long_answer == "Guido van Rossum\nmade it."
    assert first.short_answers == ["Guido van Rossum", "Guido"]
    assert (second.question_id, second.row_number, second.short_answers) == ("nq_q000001", 3, [])


def test_columns_in_any_order_with_extras_and_bom(tmp_path: Path) -> None:
    path = write(tmp_path, b"\xef\xbb\xbfShort_Answer, id ,Long_Answer,Question\nx,7,passage,q?\n")
    (row,) = load_nq_csv(path).rows
    assert (row.question, row.long_answer, row.short_answers) == ("q?", "passage", ["x"])


def test_missing_column_names_file_and_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "question,answer\nq,a\n")
    with pytest.raises(InputError) as info:
        load_nq_csv(path)
    message = str(info.value)
    assert str(path) in message and "long_answer" in message and "short_answer" in message
    assert info.value.path == str(path)


def test_empty_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="empty"):
        load_nq_csv(write(tmp_path, ""))


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_nq_csv(tmp_path / "absent.csv")


def test_empty_question_or_long_answer_is_rejected_with_row_and_column(tmp_path: Path) -> None:
    text = HEADER + "q1,p1,a\n,p2,b\n\nq3,  ,c\n , ,d\nq5,p5,e\n"
    load = load_nq_csv(write(tmp_path, text))
    assert [r.question_id for r in load.rows] == ["nq_q000000", "nq_q000004"]
    assert len(load.rows) + len(load.rejects) == load.total == 5  # the blank line is not a row
    reasons = {r.case_id: r.reason for r in load.rejects}
    where = f"file {tmp_path / 'nq.csv'}, "  # every reject names the file, then the row
    assert reasons == {
        "nq_q000001": where + "row 3: empty 'question'",
        "nq_q000002": where + "row 5: empty 'long_answer'",  # the blank line is spreadsheet row 4
        "nq_q000003": where + "row 6: empty 'question' and 'long_answer'",
    }
    assert all(r.source_file.endswith("nq.csv") and r.index is not None for r in load.rejects)


def test_stray_fields_are_rejected(tmp_path: Path) -> None:
    load = load_nq_csv(write(tmp_path, HEADER + "q1,p1,a,oops\nq2,p2,b,\n"))
    assert [r.question_id for r in load.rows] == ["nq_q000001"]  # an empty trailing field is harmless
    assert "4 fields but the header has 3" in load.rejects[0].reason


def test_non_utf8_bytes_name_file_row_line_and_offset(tmp_path: Path) -> None:
    data = (HEADER + 'q1,"multi\nline",a\nq2,caf').encode("utf-8") + b"\xe9" + b",b\n"
    path = write(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_nq_csv(path)
    message = str(info.value)
    assert str(path) in message
    assert "row 3 (line 4)" in message  # row 2 spans lines 2-3
    offset = data.index(b"\xe9")
    assert f"byte offset {offset}" in message and "0xe9" in message


def test_unclosed_quote_names_the_row(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + 'q1,p1,a\nq2,"never closed,b\nq3,p3,c\n')
    with pytest.raises(InputError, match=r"malformed CSV in row 3"):
        load_nq_csv(path)


def test_sample_size_reads_only_the_first_rows(tmp_path: Path) -> None:
    text = HEADER + 'q1,p1,a\n,p2,b\nq3,p3,c\nq4,"broken,d\n'
    load = load_nq_csv(write(tmp_path, text), sample_size=3)  # the malformed row 4 is never read
    assert load.total == 3 and len(load.rows) == 2 and len(load.rejects) == 1
    with pytest.raises(ValueError):
        load_nq_csv(write(tmp_path, text), sample_size=0)


def test_first_rows_of_a_whole_load_are_the_sampled_read(tmp_path: Path) -> None:
    text = HEADER + "q1,p1,a\n,p2,b\nq1,p1,c\nq4,p4,d\nq1,p1,e\n"  # a reject, then duplicates inside and past the cut
    path = write(tmp_path, text)
    for n in (1, 2, 3, 4, 5, 9):
        assert load_nq_csv(path).first(n) == load_nq_csv(path, sample_size=n)


def test_split_short_answers() -> None:
    assert split_short_answers("291 | 291 episodes") == ["291", "291 episodes"]
    assert split_short_answers(" a |  | b ") == ["a", "b"]
    assert split_short_answers("") == []


# -- dedup and outputs -----------------------------------------------------------------------------

DUPLICATES = HEADER + (
    "who made python,Guido van Rossum made Python.,Guido van Rossum\n"
    "when was python 3 released,Python 3.0 came out in 2008.,2008\n"
    'who is the bdfl,"Guido   van Rossum\nmade Python.",Guido\n'
    "who created python,Guido van Rossum made Python.,Guido van Rossum | Guido\n"
    "case differs,guido van rossum made python.,x\n"
)


def test_identical_long_answers_become_one_chunk_relevant_to_every_question(tmp_path: Path) -> None:
    rows = load_nq_csv(write(tmp_path, DUPLICATES)).rows
    corpus = dedupe_chunks(rows)
    assert [c["chunk_id"] for c in corpus.chunks] == ["nq_000000", "nq_000001", "nq_000002"]
    assert corpus.duplicates == 2 and len(corpus.chunks) + corpus.duplicates == len(rows)
    assert corpus.question_chunk == {
        "nq_q000000": "nq_000000",
        "nq_q000001": "nq_000001",
        "nq_q000002": "nq_000000",  # same after whitespace normalisation
        "nq_q000003": "nq_000000",
        "nq_q000004": "nq_000002",  # case is kept: a different passage
    }
    assert nq_qrels(corpus.chunks) == {qid: {cid: 1} for qid, cid in corpus.question_chunk.items()}


def test_chunk_shape_is_exact_and_keeps_the_first_question(tmp_path: Path) -> None:
    corpus = dedupe_chunks(load_nq_csv(write(tmp_path, DUPLICATES)).rows)
    path = write_chunks_json(corpus.chunks, tmp_path / "out" / "chunks.json")
    chunks = json.loads(path.read_text(encoding="utf-8"))
    assert chunks[0] == {
        "chunk_id": "nq_000000",
        "document_id": NQ_DOCUMENT_ID,
        "content": "Guido van Rossum made Python.",
        "metadata": {
            "question": "who made python",
            "short_answer": "Guido van Rossum",
            "question_id": "nq_q000000",
            "question_ids": ["nq_q000000", "nq_q000002", "nq_q000003"],
        },
    }
    assert all(set(c) == {"chunk_id", "document_id", "content", "metadata"} for c in chunks)


def test_documents_and_cases(tmp_path: Path) -> None:
    path = write(tmp_path, DUPLICATES)
    load = load_nq_csv(path)
    corpus = dedupe_chunks(load.rows)
    doc = nq_documents(corpus.chunks)[1]
    assert (doc.doc_id, doc.text, doc.kind, doc.module, doc.source) == (
        "nq_000001",
        "Python 3.0 came out in 2008.",
        "passage",
        None,
        "nq:natural_questions",
    )
    case = nq_cases(load.rows, path)[3]
    assert (case.case_id, case.benchmark_type, case.query, case.index, case.source_file) == (
        "nq_q000003",
        "nq",
        "who created python",
        3,
        str(path),
    )
    assert case.extra == {
        "long_answer": "Guido van Rossum made Python.",
        "short_answers": ["Guido van Rossum", "Guido"],
    }


def test_normalise_whitespace() -> None:
    assert normalise_whitespace("  a\u00a0b\n\tc  ") == "a b c"


def test_embedded_sample_merges_eight_duplicates() -> None:
    load = load_nq_csv(SAMPLE_CSV)
    corpus = dedupe_chunks(load.rows)
    assert (load.total, len(load.rejects), len(corpus.chunks), corpus.duplicates) == (60, 0, 52, 8)
    assert any("\n" in row.long_answer for row in load.rows)


# -- the real NQ sample ----------------------------------------------------------------------------


@pytest.mark.integration
def test_real_nq_csv_counts_add_up(shared_data: Path) -> None:
    path = shared_data / "nq" / "natural_questions_sample.csv"
    load = load_nq_csv(path)
    assert load.total == 1656 and len(load.rows) + len(load.rejects) == load.total
    corpus = dedupe_chunks(load.rows)
    assert 0 < corpus.duplicates < len(load.rows)
    assert len(corpus.chunks) + corpus.duplicates == len(load.rows)
    assert sum(len(c["metadata"]["question_ids"]) for c in corpus.chunks) == len(load.rows)
    assert len({normalise_whitespace(c["content"]) for c in corpus.chunks}) == len(corpus.chunks)
    assert set(nq_qrels(corpus.chunks)) == {row.question_id for row in load.rows}
    assert sum(1 for row in load.rows if len(row.short_answers) > 1) > 0
