"""The one Dagster entry point: every module under ``defs/`` is loaded; steps run in one process."""

from __future__ import annotations

from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    # In-process execution: torch and the model load once per run instead of once per step
    # (each step of the default multiprocess executor is a fresh Python process).
    return dg.Definitions.merge(
        dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
        dg.Definitions(executor=dg.in_process_executor),
    )
