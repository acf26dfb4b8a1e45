"""The verifier's settings in a dataset's registry entry (``verifier:``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class VerifierSettings(BaseModel):
    """Where multiple-choice questions are proven: the interpreter holding the library under test.

    The library has two names: ``library`` is its *distribution* (what pip installs,
    ``google-adk``; its version is reported), ``import_name`` the *module* the verifier probes
    (``google.adk``). Without ``import_name`` it is derived from the distribution's RECORD (else
    top_level.txt) inside the target environment. A setting that names nothing installed or importable
    there stops the verifier with an error naming the setting; it never yields verdicts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: Path | None = None  # default: this interpreter (the standard library under test)
    library: str | None = Field(None, min_length=1)  # distribution name whose version is reported, e.g. google-adk
    import_name: str | None = Field(None, pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")  # module probed, e.g. google.adk
    timeout_s: float = Field(20.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    # who proves what the offline prover leaves open: `llm` asks the configured LLM endpoint (RETRIEVAL_LLM_*)
    # for a pytest check per option, run in the same sandbox; without an endpoint it stays offline, with a warning
    prover: Literal["offline", "llm"] = "offline"
    # other environments of the same library (e.g. .venvs/adk120/bin/python): every proposed fix must be Valid
    # there too, and a question Unverifiable here but Valid there gets its stale distractor replaced
    compare_pythons: list[Path] = Field(default_factory=list)
