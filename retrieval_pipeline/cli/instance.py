"""``DAGSTER_HOME``'s instance, initialised once under a lock, so two first runs on a fresh home do not race.

Opening a fresh home creates its SQLite storages (runs, event log index, schedules) and stamps their schema
with alembic. Two processes doing it at once (two ``make run`` started together, a CI matrix on one runner) raced:
one failed with ``sqlalchemy.exc.OperationalError: table alembic_version already exists``. Here the first open and
the first use of every storage hold ``<home>/.instance-init.lock`` (a ``filelock`` lock; a second process waits,
then opens the initialised home). Concurrency on an initialised home was and is Dagster's own (SQLite locking).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from retrieval_pipeline.core.common.atomic import file_lock

#: The lock file inside ``DAGSTER_HOME``.
INIT_LOCK = ".instance-init.lock"


@contextlib.contextmanager
def home_instance() -> Iterator[dg.DagsterInstance]:
    """``DagsterInstance.get()`` (the home ``DAGSTER_HOME`` names, created when missing), initialised under the lock."""
    folder = Path(os.environ["DAGSTER_HOME"])
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / INIT_LOCK):
        instance = dg.DagsterInstance.get()
        try:  # each storage created and its schema stamped inside the lock: runs, event log index, schedules
            instance.get_runs_count()
            instance.get_asset_keys()
            instance.all_instigator_state()
        except BaseException:
            instance.dispose()
            raise
    try:
        yield instance
    finally:
        instance.dispose()
