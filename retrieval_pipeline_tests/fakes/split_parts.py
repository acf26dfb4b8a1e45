"""Installed distributions made by hand in a temporary site folder: the parts of a split file, a few bytes each.

``install_parts(site, "fake-model-part{index}", slices)`` writes, for each slice, a ``.dist-info`` with
``METADATA`` and a ``RECORD`` that lists the slice with its sha256 (as pip writes it) beside the slice itself
(``fake_model_partK/data/partKK.bin``). With ``site`` on ``sys.path``, ``importlib.metadata`` finds them.
:func:`missing_after_backport` looks for them in a child process that has imported the ``importlib_metadata``
backport.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_pipeline.core.services.split_packages import SplitFile, numbered

SLICE_PATTERN = r"[^/]+/data/part(?P<number>\d+)\.bin"


def record_hash(data: bytes) -> str:
    """The ``sha256=`` value pip writes in a RECORD (urlsafe base64, unpadded)."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def install_part(site: Path, distribution: str, index: int, data: bytes, *, version: str = "1.0", recorded: bytes | None = None) -> Path:
    """One part: its slice file and its dist-info (replacing any other version's); ``recorded``: the bytes whose hash the RECORD lists (default ``data``)."""
    package = distribution.replace("-", "_")
    slice_path = site / package / "data" / f"part{index:02d}.bin"
    slice_path.parent.mkdir(parents=True, exist_ok=True)
    slice_path.write_bytes(data)
    for old in site.glob(f"{package}-*.dist-info"):  # another version is replaced, as pip does
        shutil.rmtree(old)
    info = site / f"{package}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    relative = slice_path.relative_to(site).as_posix()
    stated = data if recorded is None else recorded
    (info / "RECORD").write_text(f"{relative},sha256={record_hash(stated)},{len(stated)}\n{info.name}/RECORD,,\n")
    return slice_path


def install_parts(site: Path, template: str, slices: list[bytes], *, version: str = "1.0", skip: tuple[int, ...] = ()) -> None:
    """Parts 1..len(slices) of ``template`` (``{index}`` the part number), leaving out the indexes in ``skip``."""
    for index, data in enumerate(slices, start=1):
        if index not in skip:
            install_part(site, template.format(index=index), index, data, version=version)


def split_of(template: str, slices: list[bytes], **kwargs: object) -> SplitFile:
    """The :class:`SplitFile` of such parts (``kwargs``: ``name``, ``version``, ``sha256``, ``no_deps``)."""
    settings = {"name": "model.gguf", **kwargs}
    return SplitFile(distributions=numbered(template, len(slices)), slice_pattern=SLICE_PATTERN, **settings)  # type: ignore[arg-type]


def missing_after_backport(split: SplitFile, site: Path) -> str:
    """What :func:`~retrieval_pipeline.core.services.split_packages.find_slices` says is missing in ``site`` once the
    ``importlib_metadata`` backport is imported (in a child process: the import changes the whole process, so
    the test skips without importing it when it is not installed)."""
    if importlib.util.find_spec("importlib_metadata") is None:
        pytest.skip("the importlib_metadata backport is not installed")
    fields = json.dumps(dataclasses.asdict(split))
    command = [sys.executable, "-m", "retrieval_pipeline_tests.fakes.find_after_backport", fields, str(site)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
