"""Joining a file from the slices of split PyPI packages, on fake parts of a few bytes in a temporary site folder."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from pathlib import Path

import pytest

from retrieval_pipeline.core import split_packages
from retrieval_pipeline.core.split_packages import SplitFile, SplitPackageError, join_split_file, slices, split_file_missing
from retrieval_pipeline_tests.fakes.split_parts import install_part, install_parts, split_of

# 12 parts: part 10 must come after part 9 (not after part 1, as a name sort would put it)
SLICES = [bytes([i]) * (i + 3) + f"<{i}>".encode() for i in range(1, 13)]
WHOLE = b"".join(SLICES)


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture()
def template() -> str:
    """A distribution name no other test (nor the real environment) uses."""
    return f"fake-split-{uuid.uuid4().hex[:8]}-part{{index}}"


def test_joins_the_parts_in_numeric_order_and_records_the_sha256(site, template, tmp_path):
    install_parts(site, template, SLICES)
    split = split_of(template, SLICES, sha256=hashlib.sha256(WHOLE).hexdigest())
    path = join_split_file(split, tmp_path / "cache")
    assert path.read_bytes() == WHOLE
    assert path.name == "model.gguf" and path.parent.parent == tmp_path / "cache"
    record = json.loads(path.with_name("model.gguf.json").read_text())
    assert record["sha256"] == hashlib.sha256(WHOLE).hexdigest() and record["size"] == len(WHOLE)
    assert [p["distribution"] for p in record["parts"]] == [template.format(index=i) for i in range(1, 13)]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_reuse_checks_the_recorded_sha256_and_joins_again_when_the_file_changed(site, template, tmp_path, monkeypatch):
    install_parts(site, template, SLICES)
    split = split_of(template, SLICES)
    path = join_split_file(split, tmp_path / "cache")
    joins: list[int] = []
    real_join = split_packages._join
    monkeypatch.setattr(split_packages, "_join", lambda *a: joins.append(1) or real_join(*a))
    assert join_split_file(split, tmp_path / "cache") == path and joins == []  # whole and unchanged: reused
    damaged = bytearray(WHOLE)
    damaged[5] ^= 0xFF  # same size, one byte flipped
    path.write_bytes(bytes(damaged))
    assert join_split_file(split, tmp_path / "cache").read_bytes() == WHOLE and joins == [1]
    path.with_name("model.gguf.json").unlink()  # a crash between the file and its record: joined again
    assert join_split_file(split, tmp_path / "cache").read_bytes() == WHOLE and joins == [1, 1]


def test_a_missing_part_is_named_with_the_pip_command(site, template, tmp_path):
    install_parts(site, template, SLICES, skip=(7,))
    split = split_of(template, SLICES, version="1.0")
    missing = template.format(index=7)
    with pytest.raises(SplitPackageError, match=rf"{missing} is not installed \(part 7 of 12 of model.gguf\): pip install {missing}==1.0$"):
        join_split_file(split, tmp_path / "cache")
    assert split_file_missing(split) is not None and missing in str(split_file_missing(split))
    assert not (tmp_path / "cache").exists()  # nothing is written before every part is found


def test_a_slice_that_differs_from_its_record_is_refused_and_nothing_is_left(site, template, tmp_path):
    install_parts(site, template, SLICES)
    install_part(site, template.format(index=4), 4, b"tampered", recorded=SLICES[3])
    with pytest.raises(SplitPackageError, match=r"part04.bin .* differs from the sha256 its RECORD lists"):
        join_split_file(split_of(template, SLICES), tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == [".model.gguf.lock"]


def test_a_joined_file_that_is_not_the_pinned_one_is_refused(site, template, tmp_path):
    install_parts(site, template, SLICES)
    with pytest.raises(SplitPackageError, match=r"has sha256 [0-9a-f]{64}, not the expected 0{64}"):
        join_split_file(split_of(template, SLICES, sha256="0" * 64), tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("model.gguf*"))


def test_versions_must_agree_and_match_the_pin(site, template, tmp_path):
    install_parts(site, template, SLICES)
    install_part(site, template.format(index=3), 3, SLICES[2], version="2.0")
    with pytest.raises(SplitPackageError, match="have different versions"):
        slices(split_of(template, SLICES))
    with pytest.raises(SplitPackageError, match=rf"{template.format(index=3)} is version 2.0, not 1.0"):
        slices(split_of(template, SLICES, version="1.0"))


def test_new_parts_make_a_new_cache_file(site, template, tmp_path):
    install_parts(site, template, SLICES[:2])
    first = join_split_file(split_of(template, SLICES[:2]), tmp_path / "cache")
    install_part(site, template.format(index=2), 2, b"a newer slice")
    second = join_split_file(split_of(template, SLICES[:2]), tmp_path / "cache")
    assert first != second and second.read_bytes() == SLICES[0] + b"a newer slice" and first.read_bytes() == SLICES[0] + SLICES[1]


def test_concurrent_callers_join_once_and_get_the_same_whole_file(site, template, tmp_path, monkeypatch):
    install_parts(site, template, SLICES)
    split = split_of(template, SLICES)
    joins: list[int] = []
    real_join = split_packages._join
    monkeypatch.setattr(split_packages, "_join", lambda *a: joins.append(1) or real_join(*a))
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(join_split_file(split, tmp_path / "cache"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4 and len(set(results)) == 1 and results[0].read_bytes() == WHOLE
    assert joins == [1]


def test_a_part_listing_no_slice_is_reported(site, template, tmp_path):
    install_parts(site, template, SLICES[:1])
    split = SplitFile("model.gguf", template, 1, "*/weights/*.bin")
    with pytest.raises(SplitPackageError, match=r"must list exactly one file matching '\*/weights/\*.bin'.*lists none"):
        slices(split)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parts": 0}, "at least one part"),
        ({"distribution": "no-index-part"}, "must contain"),
        ({"file_name": "../x.gguf"}, "plain file name"),
    ],
)
def test_bad_split_settings_are_refused(kwargs, message):
    settings = {"file_name": "m.gguf", "distribution": "p{index}", "parts": 2, "slice_glob": "*.bin", **kwargs}
    with pytest.raises(ValueError, match=message):
        SplitFile(**settings)
