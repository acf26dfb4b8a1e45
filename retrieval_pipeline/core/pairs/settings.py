"""The pairs stage's settings in a dataset's registry entry (``targets:``), and what it reads of a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict


class TargetSettings(BaseModel):
    """How a fix_error case's primary subject is found."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # fix_error primary subject: auto = LLM reconciled with AST when an endpoint is configured, else AST
    inferer: Literal["auto", "llm", "ast"] = "auto"


class LibraryEnvironment(Protocol):
    """Where golds the corpus cannot resolve are imported: the verifier's interpreter and module (``verifier:``)."""

    python: Path | None
    import_name: str | None


class PairedSettings(Protocol):
    """What :func:`~retrieval_pipeline.core.pairs.extract.extract_pairs` reads of a dataset's settings.

    The registry's :class:`~retrieval_pipeline.core.registry.DatasetConfig` is one; the pairs stage never
    imports the registry above it, nor the verifier beside it.
    """

    name: str
    kind: str
    targets: TargetSettings
    verifier: LibraryEnvironment
