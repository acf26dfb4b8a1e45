"""``suite``: benchmark suite YAMLs scored against an API corpus.

Registry blocks: ``suites`` (the benchmark YAML files), ``corpus`` (exactly one way to build the
target corpus: a ranked-targets API index, or modules introspected) and, optionally,
``suite_files_root``: the folder the cases' code-file paths resolve against and must stay inside. Golds are FQNs resolved against
the corpus and fix_error targets are inferred: the default pair building, so no pair builder here.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import model_validator

from retrieval_pipeline.core.datasets import kind_api as api
from retrieval_pipeline.core.datasets.api_index import introspect_modules, load_ranked_targets, package_modules
from retrieval_pipeline.core.datasets.suite.loading import load_suites


class CorpusSpec(api.SettingsBlock):
    """Exactly one way to build the target corpus."""

    ranked_targets: Path | None = None
    introspect_modules: list[str] | None = None
    introspect_modules_file: Path | None = None
    introspect_package: str | None = None  # an installed package, walked into its public submodules

    @model_validator(mode="after")
    def _exactly_one(self) -> CorpusSpec:
        options = ("ranked_targets", "introspect_modules", "introspect_modules_file", "introspect_package")
        given = [n for n in options if getattr(self, n)]
        if len(given) != 1:
            raise ValueError(f"corpus needs exactly one of {', '.join(options)}; got {given or 'none'}")
        return self

    def modules(self) -> list[str]:
        """Module names to introspect (the inline list, the one-per-line file, or a package's submodules)."""
        if self.introspect_package:
            return package_modules(self.introspect_package)
        if self.introspect_modules:
            return list(self.introspect_modules)
        assert self.introspect_modules_file is not None
        lines = self.introspect_modules_file.read_text(encoding="utf-8").splitlines()
        return [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]


@api.register_adapter
class SuiteAdapter(api.DatasetAdapter):
    """Benchmark suites (api_understanding, fix_error, multiple_choice) over an API index or introspection."""

    kind = "suite"
    blocks = {
        "suites": api.Block(list[Path], is_path=True),
        "corpus": api.Block(CorpusSpec, path_keys=("ranked_targets", "introspect_modules_file")),
        # the folder a suite's fixed_file/test_file/unfixed_file paths are relative to, and confined to
        # (default: each suite's own folder); the ADK suites name files relative to their source repository
        "suite_files_root": api.Block(Path, is_path=True, required=False),
    }

    def load_cases(self, config: api.DatasetSettings) -> api.CasesBuild:

        loaded = load_suites(config.suites, files_root=getattr(config, "suite_files_root", None))
        return api.CasesBuild(loaded.cases, loaded.rejects, loaded.total)

    def build_corpus(self, config: api.DatasetSettings) -> api.CorpusBuild:

        spec: CorpusSpec = config.corpus
        if spec.ranked_targets:
            loaded = load_ranked_targets(spec.ranked_targets)
            return api.CorpusBuild(loaded.documents, loaded.rejects, dict(loaded.report), str(spec.ranked_targets))
        modules = spec.modules()
        loaded = introspect_modules(modules)
        return api.CorpusBuild(loaded.documents, loaded.rejects, dict(loaded.report), f"introspection of {len(modules)} modules")
