"""Parquet on a fixed path: ``<base_path>/<asset>/<partition>.parquet``, kept across runs for drift.

Local files are replaced atomically (:func:`~retrieval_pipeline.core.common.atomic.atomic_write`: a uniquely
named temp file in the same folder, then ``os.replace``), so a reader, or a second run writing the same
partition, never sees half a file; loads read through one open file handle, so they see one version. A
failed write keeps the previous file and removes its temp file (a SIGKILLed run may leave a
``.<name>.<random>.tmp`` behind, never a torn target).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd
from upath import UPath

from retrieval_pipeline.core.common.atomic import atomic_write

#: ``UPath.protocol`` values of local files (``""`` for plain paths, ``file``/``local`` for URLs).
_LOCAL_PROTOCOLS = frozenset({"", "file", "local"})


class ParquetIOManager(dg.UPathIOManager):
    """Stores pandas DataFrames as Parquet; partitions never overwrite each other."""

    extension = ".parquet"

    def dump_to_path(self, context: dg.OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a pandas DataFrame, got {type(obj).__name__}")
        if path.protocol in _LOCAL_PROTOCOLS:
            atomic_write(Path(path.path), lambda temp: obj.to_parquet(temp, index=False))
        else:  # an object store replaces an object whole on upload
            path.parent.mkdir(parents=True, exist_ok=True)
            obj.to_parquet(path, index=False)
        context.add_output_metadata({"dagster/row_count": len(obj)})

    def load_partitions(self, context: dg.InputContext) -> object:
        """One partition that is there: read it without the two DEBUG events Dagster logs per input.

        Every step loads its inputs this way (about 280 inputs in a run of the three samples), and each event is a
        write to the instance's event log: a quarter of a warm run's events said only "Loading 1 partitions..." and
        "Loading partition ... from <path>". The step's ``LOADED_INPUT`` event still names each input. Several
        partitions, or a missing one (``allow_missing_partitions``), go through Dagster's own loading.
        """
        keys = context.asset_partition_keys
        if len(keys) == 1:
            path = self._get_paths_for_partitions(context)[keys[0]]
            if path.exists():
                return self.load_from_path(context, path)
        return super().load_partitions(context)

    def load_from_path(self, context: dg.InputContext, path: UPath) -> pd.DataFrame:
        # Through ONE open of the file: given a path, pyarrow opens it twice (schema, then data), and a
        # writer's rename in between gave "Invalid column metadata (corrupt file?)" in a race test.
        with path.open("rb") as handle:
            return pd.read_parquet(handle)


class ParquetIOManagerFactory(dg.ConfigurableIOManagerFactory):
    """Parquet IO manager rooted at ``base_path`` (default ``data/out`` in the project)."""

    base_path: str

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetIOManager:
        return ParquetIOManager(base_path=UPath(self.base_path))
