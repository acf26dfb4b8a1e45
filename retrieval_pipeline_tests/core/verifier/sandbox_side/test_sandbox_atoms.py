"""``sandbox_side/atoms.py`` imported on its own in the host interpreter: the helpers that need no prelude."""

from __future__ import annotations

import enum
import os
import sys
import typing

import pytest

from retrieval_pipeline.core.verifier.proofs import atom_proofs
from retrieval_pipeline.core.verifier.sandbox_side import atoms


def test_source_is_the_file() -> None:
    assert atom_proofs.ATOM_SOURCE == open(atoms.__file__, encoding="utf-8").read()
    assert (atom_proofs.ENV_SCAN_CPU_S, atom_proofs.ENV_SCAN_WALL_S) == (atoms.ENV_SCAN_CPU_S, atoms.ENV_SCAN_WALL_S)


def test_readings_expand_either_names() -> None:
    names = {"app": ("either", [("module", "m"), ("instance", "App")]), "x": ("module", "x")}
    readings = atoms._readings(names)
    assert [r["app"] for r in readings] == [("module", "m"), ("instance", "App")]
    assert all(r["x"] == ("module", "x") for r in readings)
    assert atoms._readings({"x": ("module", "x")}) == [{"x": ("module", "x")}]


def test_sample_builds_truthy_values() -> None:
    class Colour(enum.Enum):
        RED = 1

    assert atoms._sample(int) == 1
    assert atoms._sample(typing.Optional[str]) == "x"  # noqa: UP045 (the typing form is what is tested)
    assert atoms._sample(list[int]) == [1]
    assert atoms._sample(dict[str, bool]) == {"x": True}
    assert atoms._sample(typing.Literal["a", "b"]) == "a"
    assert atoms._sample(Colour) is Colour.RED
    with pytest.raises(atoms._Open):
        atoms._sample(object)


def test_own_functions_skips_other_distributions() -> None:
    class Local:
        def method(self) -> None:
            pass

    assert ("method", Local.method) in list(atoms._own_functions(Local))


def test_scan_roots_put_the_standard_library_first() -> None:
    roots = atoms._scan_roots()
    assert roots and os.path.realpath(os.path.dirname(os.__file__)) in roots[0]
    assert all(os.path.isdir(r) for group in roots for r in group)


def test_grep_runs_under_the_cpu_limit() -> None:
    done = atoms._grep([sys.executable, "-c", "print('ok')"], [])
    assert done.returncode == 0 and done.stdout.strip() == "ok"
