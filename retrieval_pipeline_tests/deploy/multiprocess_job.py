"""A small job that the production multiprocess executor runs against the PostgreSQL instance.

The multiprocess executor starts every step in a new Python process, which rebuilds the job by
importing this module and calling :func:`tiny_ingest_job`. So the job is built from environment
variables that the child processes inherit, not from test fixtures: ``RETRIEVAL_DEPLOY_TEST_ROOT`` (a
temporary folder for outputs) and ``RETRIEVAL_DEPLOY_TEST_REGISTRY`` (the tiny dataset's registry).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import dagster as dg

from retrieval_pipeline import definitions as project
from retrieval_pipeline_tests.defs.conftest import VOCAB
from retrieval_pipeline_tests.defs.support import resources_in
from retrieval_pipeline_tests.fakes.resources import KeywordEncoderResource

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CODE_LOCATION = PROJECT_ROOT / "deploy" / "code_location.py"
ROOT_ENV = "RETRIEVAL_DEPLOY_TEST_ROOT"
REGISTRY_ENV = "RETRIEVAL_DEPLOY_TEST_REGISTRY"
JOB_NAME = "tiny_ingest"
#: Two independent steps, each a multi-asset with its rejects, so two step processes can run at once.
STEPS = ("raw_cases", "corpus")
ASSETS = ("raw_cases", "case_rejects", "corpus", "corpus_rejects")


def load_code_location() -> ModuleType:
    """``deploy/code_location.py`` as a module (it is a file that Dagster loads by path, not a package)."""
    name = "retrieval_deploy_code_location"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, CODE_LOCATION)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {CODE_LOCATION}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclass needs its module registered while it is built
    spec.loader.exec_module(module)
    return module


def tiny_ingest_job() -> dg.JobDefinition:
    """The ingest steps of the tiny dataset, with the executor that production uses (multiprocess, 2 steps at once)."""
    code_location = load_code_location()
    root = Path(os.environ[ROOT_ENV])
    resources = resources_in(root, KeywordEncoderResource(vocabulary=VOCAB), Path(os.environ[REGISTRY_ENV]))
    job = dg.define_asset_job(JOB_NAME, selection=list(ASSETS))
    base = dg.Definitions(assets=project.defs().assets, resources=resources, jobs=[job])
    choice = code_location.ExecutorChoice(name="multiprocess", max_concurrent=2)
    return code_location.production_definitions(base, choice).resolve_job_def(JOB_NAME)
