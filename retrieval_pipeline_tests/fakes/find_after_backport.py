"""Run in a child process: import the ``importlib_metadata`` backport, then find a split file's slices.

``python -m retrieval_pipeline_tests.fakes.find_after_backport SPLIT_JSON SITE`` (``SPLIT_JSON``: the
:class:`~retrieval_pipeline.core.services.split_packages.SplitFile`'s fields) prints the message of the
:class:`FileNotFoundError` :func:`~retrieval_pipeline.core.services.split_packages.find_slices` raises, or nothing. The
backport must come first: once imported it replaces the standard library's finder for the whole process.
"""

from __future__ import annotations

import json
import sys

import importlib_metadata  # noqa: F401  (imported for its side effect)

from retrieval_pipeline.core.services.split_packages import SplitFile, find_slices


def main(split_json: str, site: str) -> None:
    fields = json.loads(split_json)
    split = SplitFile(**{**fields, "distributions": tuple(fields["distributions"])})
    try:
        find_slices(split, [site])
    except FileNotFoundError as error:
        print(error)


if __name__ == "__main__":
    main(*sys.argv[1:3])
