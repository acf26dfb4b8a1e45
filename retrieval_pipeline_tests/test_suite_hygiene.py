"""The suite writes nothing outside the project and the temporary folder."""

from __future__ import annotations

from pathlib import Path

from retrieval_pipeline.core.verifier.verdicts.verdict_cache import key_path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def test_the_verdict_cache_key_of_a_test_run_stays_out_of_the_user_s_config_folder() -> None:
    """Tests that open a verdict cache make its HMAC key; it lands in the project's (or the run's) Dagster home."""
    where = key_path().resolve()
    assert not where.is_relative_to((Path.home() / ".config").resolve()), where
