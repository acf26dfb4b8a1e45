"""One index asset and one runs asset per retriever in ``data/config/retrievers.yaml``, partitioned by dataset.

``retrievers/<name>_index`` builds that retriever's index for a dataset; ``retrievers/<name>_runs``
ranks the dataset's queries with it. ``retrieval_runs`` gathers the runs of the retrievers the dataset
lists. Adding a retriever adds its two assets: materialising them (and ``retrieval_runs`` downstream)
builds and runs only the new one. A retriever the dataset does not list is skipped cheaply: its assets
record "not evaluated on this dataset" and write nothing but an empty run.

The retriever assets are grouped by family (``retrievers_bm25``, ``retrievers_dense``, ``retrievers_hybrid``, ...:
the spec's kind), and each carries a ``dataset/<name>`` tag per dataset that uses it, so the UI's selection
``tag:"dataset/stdlib"`` draws just the retrievers stdlib builds. A node's description starts with the
retriever's full name, which the graph may cut short.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from retrieval_pipeline.core.common.frames import from_frame
from retrieval_pipeline.core.common.progress import progress_to
from retrieval_pipeline.core.common.types import Document
from retrieval_pipeline.core.registry import Registry
from retrieval_pipeline.core.retrieval.run_loop import RUN_COLUMNS, runs_to_frame
from retrieval_pipeline.core.retrieval.runner import build_retriever, run_retriever
from retrieval_pipeline.defs.metadata import dagster_metadata
from retrieval_pipeline.defs.partitions import REGISTRY, dataset_partitions
from retrieval_pipeline.defs.resources import DEFAULT_OUT_DIR, EncoderResource, PipelineSettings

#: The asset group of every asset of this file: the file's name (a group per stage of the graph).
GROUP = __name__.rsplit(".", 1)[-1]


def index_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(["retrievers", name + "_index"])


def runs_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(["retrievers", name + "_runs"])


def retriever_step(key: dg.AssetKey) -> tuple[str, str] | None:
    """``(retriever, "index" | "runs")`` of a ``retrievers/<name>_index`` or ``_runs`` asset key, else None.

    The retriever's name ends the key's last part, so the UI titles each node by its retriever.
    """
    if len(key.path) != 2 or key.path[0] != "retrievers":
        return None
    name, _, what = key.path[1].rpartition("_")
    return (name, what) if name and what in {"index", "runs"} else None


def _not_built(registry: Registry, dataset: str, name: str) -> str | None:
    """Why ``name`` needs no index on ``dataset`` (neither listed nor a listed one's component), or None."""
    listed = registry.get(dataset).retrievers
    return None if name in registry.retrievers.closure(listed) else f"{name} is not in dataset {dataset}'s retrievers {listed}"


def _description(name: str, what: str) -> str:
    """Leads with the full asset name (the graph cuts long names in the middle), then what the asset is."""
    spec = REGISTRY.retrievers.specs.get(name)
    about = f"{spec.kind}: {spec.description}" if spec else f"invalid spec: {REGISTRY.retrievers.errors.get(name)}"
    suffix = "index" if what.startswith("The index") else "runs"
    return f"{name}_{suffix}: {what} of retriever `{name}` ({about})"


def family_group(name: str) -> str:
    """The asset group of a retriever's assets: ``retrievers_<kind>`` (its family), ``retrievers_invalid`` for a bad spec."""
    spec = REGISTRY.retrievers.specs.get(name)
    return f"retrievers_{spec.kind if spec else 'invalid'}"


def dataset_tags(name: str, what: str) -> dict[str, str]:
    """``{"retriever": name, "dataset/<d>": ""}`` for each dataset that builds this asset: its index when the
    dataset lists the retriever or one built on it, its runs when the dataset lists it."""
    tags = {"retriever": name}
    for dataset, config in REGISTRY.datasets.items():
        try:
            uses = name in config.retrievers if what == "runs" else name in REGISTRY.retrievers.closure(config.retrievers)
        except Exception:  # an invalid spec in the closure: the run reports it; the tag is only a view
            uses = name in config.retrievers
        if uses:
            tags[f"dataset/{dataset}"] = ""
    return tags


def _index_asset(name: str) -> dg.AssetsDefinition:
    spec = REGISTRY.retrievers.specs.get(name)
    components = spec.components() if spec else []

    @dg.asset(
        key=index_key(name),
        partitions_def=dataset_partitions,
        group_name=family_group(name),
        kinds={spec.kind if spec else "python"},
        deps=[index_key(c) for c in components],
        description=_description(name, "The index"),
        tags=dataset_tags(name, "index"),
        op_tags={"retrieval_pipeline/heavy": "embedding"} if spec is not None and spec.EMBEDS else None,
    )
    def index(
        context: dg.AssetExecutionContext, settings: PipelineSettings, encoder: EncoderResource, corpus: pd.DataFrame
    ) -> dg.MaterializeResult:
        registry = settings.registry()
        skipped = _not_built(registry, context.partition_key, name)
        if skipped:
            return dg.MaterializeResult(metadata={"evaluated": False, "note": skipped})
        with progress_to(context.log.info):  # tokenizing (BM25) and embedding (dense) report their progress
            params = build_retriever(
                registry.retrievers,
                context.partition_key,
                name,
                from_frame(corpus, Document),
                settings.index_dir(context.partition_key, name).parent,
                settings.cache_path(),
                encoder.encoder_for,
                log=context.log.info,  # a dense build logs each embedded shard (at most one line per 5 s)
            )
        return dg.MaterializeResult(
            metadata=dagster_metadata(
                {
                    "evaluated": True,
                    **_scalars(params),
                    "params": dg.MetadataValue.json(params),
                    "index_path": dg.MetadataValue.path(str(settings.index_dir(context.partition_key, name))),
                }
            )
        )

    return index


def _runs_asset(name: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=runs_key(name),
        partitions_def=dataset_partitions,
        group_name=family_group(name),
        kinds={"pandas"},
        deps=[index_key(name)],
        description=_description(name, "Ranked hits per query"),
        tags=dataset_tags(name, "runs"),
    )
    def runs(
        context: dg.AssetExecutionContext,
        settings: PipelineSettings,
        encoder: EncoderResource,
        retrieval_dataset: pd.DataFrame,
        corpus: pd.DataFrame,
    ) -> dg.MaterializeResult[pd.DataFrame]:
        registry = settings.registry()
        skipped = _not_built(registry, context.partition_key, name)
        if skipped or name not in registry.get(context.partition_key).retrievers:
            note = skipped or f"{name} is only a component here, not evaluated on its own"
            return dg.MaterializeResult(value=pd.DataFrame(columns=RUN_COLUMNS), metadata={"evaluated": False, "note": note})
        cfg = registry.get(context.partition_key).retrieval
        queries = dict(zip(retrieval_dataset["id"], retrieval_dataset["query"]))
        where = (settings.index_dir(context.partition_key, name).parent, settings.cache_path())
        inputs = (registry.retrievers, context.partition_key, name, from_frame(corpus, Document), queries, *where)
        done = run_retriever(*inputs, encoder.encoder_for, cfg.depth, cfg.latency_sample)
        for qid, error in list(done.timed.errors.items())[:20]:
            context.log.warning(f"{name} failed on query {qid!r}: {error}")
        return dg.MaterializeResult(value=runs_to_frame([done.timed]), metadata=dagster_metadata(_runs_metadata(done, len(queries), cfg)))

    return runs


def _runs_metadata(done: Any, queries: int, cfg: Any) -> dict[str, object]:
    """What a retriever's runs step shows: queries, failures, depth, the latency sample, time and parameters."""
    return {
        "evaluated": True,
        "queries": queries,
        "failed_queries": len(done.timed.errors),
        "depth": cfg.depth,
        "latency_sample": len(done.timed.latency_ms),
        "seconds": round(done.seconds, 3),
        "params": dg.MetadataValue.json(done.params),
    }


def _scalars(params: dict) -> dict[str, object]:
    """The flat numbers and strings of ``retriever.json`` (nested parts stay in the JSON entry)."""
    return {k: v for k, v in params.items() if isinstance(v, (int, float, str, bool))}


def empty_runs(frame: pd.DataFrame, retrievers: list[str]) -> list[str]:
    """The retrievers whose runs hold no hit at all (a query with no hit keeps one row of rank 0)."""
    answered = set(frame.loc[frame["rank"] > 0, "retriever"])
    return [name for name in retrievers if name not in answered]


RETRIEVER_NAMES = REGISTRY.retrievers.names
retriever_assets = [make(n) for n in RETRIEVER_NAMES for make in (_index_asset, _runs_asset)]


class RunsConfig(dg.Config):
    """Per-run knobs for ``retrieval_runs``."""

    sample_size: int | None = None  # evaluate only the first N queries (a quick look; metrics say so)
    # a quick look writes the dataset's Parquet outputs, exports and report like a full run: in the project's own
    # data/out it is refused (it would replace the full evaluation silently) unless this is true
    overwrite_main_outputs: bool = False


def side_run_refusal(config: RunsConfig, out_dir: str, dataset: str) -> str | None:
    """Why a ``sample_size`` run may not write into the project's own ``data/out``, or None (a full run, another out dir,
    or ``overwrite_main_outputs``)."""
    if config.sample_size is None or config.overwrite_main_outputs or Path(out_dir).resolve() != DEFAULT_OUT_DIR.resolve():
        return None
    return (
        f"sample_size={config.sample_size} would replace the full evaluation of {dataset} in {DEFAULT_OUT_DIR} (its Parquet "
        f"outputs, exports and report) with a {config.sample_size}-query one: run the quick look in its own folder, "
        f"`python -m retrieval_pipeline.cli.run --datasets {dataset} --out-dir data/out/quick-look --config-json "
        f'\'{{"ops": {{"retrieval_runs": {{"config": {{"sample_size": {config.sample_size}}}}}}}}}\'`, or set '
        "overwrite_main_outputs: true to replace them"
    )


@dg.asset(
    partitions_def=dataset_partitions,
    group_name=GROUP,
    kinds={"pandas"},
    ins={f"runs_{i}": dg.AssetIn(key=runs_key(n), metadata={"allow_missing_partitions": True}) for i, n in enumerate(RETRIEVER_NAMES)},
)
def retrieval_runs(
    context: dg.AssetExecutionContext, config: RunsConfig, settings: PipelineSettings, **runs: pd.DataFrame
) -> dg.MaterializeResult[pd.DataFrame]:
    """Ranked results of every retriever the dataset lists, side by side (long format: retriever, query, rank).

    Each retriever's runs come from its own ``retrievers/<name>_runs`` asset, so a retriever added to the
    dataset is computed once and the others are reused as they are.
    """
    dataset = settings.dataset(context.partition_key)
    refusal = side_run_refusal(config, settings.out_dir, context.partition_key)
    if refusal:
        raise dg.Failure(refusal)
    by_name = {n: runs.get(f"runs_{i}") for i, n in enumerate(RETRIEVER_NAMES)}
    missing = [n for n in dataset.retrievers if by_name.get(n) is None or by_name[n].empty]
    if missing:
        raise dg.Failure(
            f"dataset {context.partition_key}: no runs of {missing}; materialise "
            + ", ".join(f"`retrievers/{n}_runs`" for n in missing)
            + " for this dataset first"
        )
    frame = pd.concat([by_name[n] for n in dataset.retrievers], ignore_index=True)
    if config.sample_size is not None:
        first = list(dict.fromkeys(frame["query_id"]))[: config.sample_size]
        frame = frame[frame["query_id"].isin(first)].reset_index(drop=True)
    failed = frame[frame["error"].notna()] if "error" in frame else frame.iloc[0:0]
    empty = empty_runs(frame, dataset.retrievers)
    for name in empty:
        context.log.warning(f"retriever {name} returned no hit for any query of {context.partition_key}: every metric of it is 0")
    return dg.MaterializeResult(
        value=frame,
        metadata=dagster_metadata(
            {
                "empty_runs": ", ".join(empty) or "none",
                "retrievers": ", ".join(dataset.retrievers),
                "baseline": dataset.baseline_retriever,
                "queries": int(frame["query_id"].nunique()),
                "failed_queries": int(len(failed)),
            }
        ),
    )
