"""Parquet on a fixed path: ``<base_path>/<asset>/<partition>.parquet``, kept across runs for drift."""

import pandas as pd
import dagster as dg
from upath import UPath


class ParquetIOManager(dg.UPathIOManager):
    """Stores pandas DataFrames as Parquet; partitions never overwrite each other."""

    extension = ".parquet"

    def dump_to_path(self, context: dg.OutputContext, obj: pd.DataFrame, path: UPath) -> None:
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()}: expected a pandas DataFrame, got {type(obj).__name__}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        obj.to_parquet(tmp, index=False)
        tmp.replace(path)  # atomic: a crashed run never leaves half a file
        context.add_output_metadata({"dagster/row_count": len(obj)})

    def load_from_path(self, context: dg.InputContext, path: UPath) -> pd.DataFrame:
        return pd.read_parquet(path)


class ParquetIOManagerFactory(dg.ConfigurableIOManagerFactory):
    """Parquet IO manager rooted at ``base_path`` (default ``data/out`` in the project)."""

    base_path: str

    def create_io_manager(self, context: dg.InitResourceContext) -> ParquetIOManager:
        return ParquetIOManager(base_path=UPath(self.base_path))
