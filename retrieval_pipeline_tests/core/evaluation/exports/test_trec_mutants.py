"""TREC I/O, against the mutants ``benchmarks/mutation.py`` found alive in :mod:`retrieval_pipeline.core.evaluation.exports.trec` (its writers now in :mod:`.trec_writer`).

What the older tests left open: whole error messages (the file, the line, the query and the expected
layout are all named), the float32 range's own bound, unreadable files, and UTF-8 whatever the locale.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.evaluation.exports.trec import read_trec_qrels, read_trec_run
from retrieval_pipeline.core.evaluation.exports.trec_writer import untie_scores, write_trec_qrels, write_trec_run

FLOAT32_MAX = float(np.finfo(np.float32).max)


def _exactly(message: str) -> str:
    return "^" + re.escape(message) + "$"


def test_the_largest_float32_is_in_range():
    """trec_eval reads scores as C float: its largest finite value is a valid score, one step beyond is not."""
    assert untie_scores("q", [FLOAT32_MAX, -FLOAT32_MAX]) == [FLOAT32_MAX, -FLOAT32_MAX]
    beyond = float(np.nextafter(FLOAT32_MAX, np.inf))
    with pytest.raises(ValueError, match="beyond float32 range"):
        untie_scores("q", [beyond])


@pytest.mark.parametrize(
    ("hits", "message"),
    [
        (
            [("a", 1.0), ("b", 2.0)],
            "run for query 'q9': score 2.0 at rank 2 is higher than 1.0 at the rank above; a run must be sorted best first",
        ),
        ([("a", 1.0), ("b", float("nan"))], "run for query 'q9': score nan at rank 2 is not finite"),
        ([("a", "high")], "run for query 'q9': score 'high' at rank 1 is not a number"),
    ],
)
def test_write_run_score_errors_name_the_query(tmp_path: Path, hits, message: str):
    with pytest.raises(ValueError, match=_exactly(message)):
        write_trec_run({"q9": hits}, tmp_path / "run", tag="t")


def test_write_qrels_doc_id_error_names_the_query(tmp_path: Path):
    with pytest.raises(ValueError, match=_exactly("doc id (query 'q') 'd 1' contains whitespace; TREC files are whitespace-separated")):
        write_trec_qrels({"q": {"d 1": 1}}, tmp_path / "qrels")


@pytest.mark.parametrize(
    ("reader", "text", "message"),
    [
        (read_trec_run, "q Q0 d 1 1.0\n", "line 1: expected 6 fields (query_id Q0 doc_id rank score tag), got 5"),
        (read_trec_qrels, "q 0\n", "line 1: expected 4 or 3 fields (query_id 0 doc_id grade, or query_id doc_id grade), got 2"),
        (read_trec_qrels, "q 0 d 1\nq 0 e x\n", "line 2: grade 'x' is not an integer"),
        (read_trec_qrels, "q 0 d 1\nq 0 d 2\n", "line 2: doc id 'd' appears twice for query 'q'"),
        (read_trec_run, "q Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n", "line 2: doc id 'd' appears twice for query 'q'"),
    ],
)
def test_read_errors_name_the_file_the_line_and_the_layout(tmp_path: Path, reader, text: str, message: str):
    path = tmp_path / "file.trec"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=_exactly(f"file {path}: {message}")) as caught:
        reader(path)
    assert caught.value.path == str(path)


@pytest.mark.parametrize("reader", [read_trec_run, read_trec_qrels])
def test_unreadable_files_are_input_errors_naming_the_file(tmp_path: Path, reader):
    missing = tmp_path / "absent.trec"
    with pytest.raises(InputError, match="^" + re.escape(f"file {missing}: cannot read file: [Errno 2] No such file")) as caught:
        reader(missing)
    assert caught.value.path == str(missing)
    latin1 = tmp_path / "latin1.trec"
    latin1.write_bytes("q 0 caf\u00e9 1\n".encode("latin-1"))
    with pytest.raises(InputError, match="^" + re.escape(f"file {latin1}: line 1: not UTF-8 text (invalid continuation byte")) as caught:
        reader(latin1)
    assert caught.value.path == str(latin1)


_ASCII_LOCALE_SCRIPT = textwrap.dedent(
    """
    import locale, sys
    from pathlib import Path
    from retrieval_pipeline.core.evaluation.exports.trec import read_trec_qrels, read_trec_run
    from retrieval_pipeline.core.evaluation.exports.trec_writer import write_trec_qrels, write_trec_run
    assert locale.getpreferredencoding(False).lower() not in ("utf-8", "utf8"), locale.getpreferredencoding(False)
    folder = Path(sys.argv[1])
    run = {"caf\\u00e9": [("d\\u00fc", 2.0), ("\\u6587\\u66f8", 1.0)]}
    qrels = {"caf\\u00e9": {"d\\u00fc": 1}}
    write_trec_run(run, folder / "run.trec", tag="t")
    write_trec_qrels(qrels, folder / "qrels.trec")
    assert read_trec_run(folder / "run.trec") == run
    assert read_trec_qrels(folder / "qrels.trec") == qrels
    assert read_trec_qrels(folder / "from_parent.trec") == {"q\\u00e9": {"d": 3}}
    print("ok")
    """
)


def test_files_are_utf8_whatever_the_locale(tmp_path: Path):
    """In an ASCII (C) locale, non-ASCII ids are still written and read as UTF-8."""
    (tmp_path / "from_parent.trec").write_bytes("q\u00e9 0 d 3\n".encode())
    # in this process too (which is also how mutmut learns that this test exercises the readers and writers)
    assert read_trec_qrels(write_trec_qrels({"q\u00e9": {"d": 3}}, tmp_path / "here.trec")) == {"q\u00e9": {"d": 3}}
    assert read_trec_run(write_trec_run({"q": [("d\u00fc", 1.0)]}, tmp_path / "here.run", tag="t")) == {"q": [("d\u00fc", 1.0)]}
    env = os.environ | {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the same modules as this process
    done = subprocess.run([sys.executable, "-c", _ASCII_LOCALE_SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert (tmp_path / "run.trec").read_bytes().decode("utf-8").splitlines()[0] == "caf\u00e9 Q0 d\u00fc 1 2.0 t"
