"""``tools/install.py``: pip's sources handed to uv, and pip itself whenever uv cannot stand in for it.

The fakes are shell scripts standing in for the venv's ``pip`` (its ``config list`` is this machine's pip.conf and
PIP_* variables) and for ``VENV/uv/bin/uv``; each records the arguments it was called with.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import stat
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("install_tool", PROJECT / "tools" / "install.py")
install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install)

#: ``pip config list`` on this project's machines (pip.conf in /etc and ~/.config, PIP_* variables)
MACHINE_CONFIG = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/elsewhere'
"""


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _venv(tmp_path: Path, config: str | None, *, uv: str | None) -> Path:
    """A venv whose pip prints ``config`` (None: ``pip config list`` fails) and records installs; with ``uv``, a uv
    that runs that shell code."""
    venv = tmp_path / "venv"
    _script(venv / "bin" / "python", "exit 0\n")
    (tmp_path / "config.txt").write_text(config or "")
    _script(
        venv / "bin" / "pip",
        f'if [ "$1" = config ]; then cat {shlex.quote(str(tmp_path / "config.txt"))}; exit {1 if config is None else 0}; fi\n'
        f'echo "$@" >> {shlex.quote(str(tmp_path / "pip.log"))}\n'
        'case "$*" in *--target*) exit 1;; esac\n',  # uv cannot be installed unless the test made it
    )
    if uv is not None:
        _script(venv / "uv" / "bin" / "uv", f'echo "$@" >> {shlex.quote(str(tmp_path / "uv.log"))}\n{uv}')
    return venv


def _log(tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / name
    return path.read_text().splitlines() if path.exists() else []


def test_pips_sources_reach_uv_with_the_environment_over_the_config_files(tmp_path: Path) -> None:
    options = install.pip_options(str(_venv(tmp_path, MACHINE_CONFIG, uv=None) / "bin" / "pip"))
    assert options["find-links"] == "/opt/wheels"  # PIP_FIND_LINKS wins over pip.conf, as in pip
    command, env = install.uv_command(Path("uv"), Path("v"), options, ["-q", "torch==2.13.0"])
    pairs = list(zip(command, command[1:]))
    assert ("--find-links", "/opt/wheels") in pairs and ("--find-links", "/opt/elsewhere") not in pairs
    assert ("--extra-index-url", "file:///opt/pypi/simple") in pairs and ("--extra-index-url", "file:///opt/pypi-more/simple") in pairs
    assert ("-c", "/etc/xdg/pip/constraints.txt") in pairs
    assert ("--index-strategy", "unsafe-best-match") in pairs  # the best version over every source, as pip picks
    assert "--compile-bytecode" in command and command[-2:] == ["-q", "torch==2.13.0"]
    assert env["SSL_CERT_FILE"] == "/etc/ssl/certs/ca-certificates.crt" and env["UV_HTTP_TIMEOUT"] == "180"


def test_uv_installs_when_it_can_and_pip_is_only_asked_for_its_configuration(tmp_path: Path) -> None:
    venv = _venv(tmp_path, MACHINE_CONFIG, uv="exit 0\n")
    assert install.main(venv, ["-q", "-e", ".[dev]"]) == 0
    (call,) = _log(tmp_path, "uv.log")
    assert call.startswith(f"pip install --python {venv}/bin/python") and call.endswith("-q -e .[dev]")
    assert _log(tmp_path, "pip.log") == []


@pytest.mark.parametrize(
    ("config", "uv", "why"),
    [
        (MACHINE_CONFIG + "global.no-binary=':all:'\n", "exit 0\n", "sets global.no-binary"),  # an option uv is not told
        (MACHINE_CONFIG, None, "could not be installed"),  # no uv wheel to be had
        (MACHINE_CONFIG, "exit 2\n", "uv failed"),  # uv itself fails (a source it cannot read, say)
        (None, "exit 0\n", "`pip config list` failed"),  # pip's configuration cannot be read: nothing to hand uv
    ],
    ids=["untranslated-option", "no-uv", "uv-fails", "no-config"],
)
def test_pip_installs_instead_and_says_why(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], config: str, uv: str | None, why: str
) -> None:
    venv = _venv(tmp_path, config, uv=uv)
    assert install.main(venv, ["-q", "-c", "constraints/pipeline.txt", "torch==2.13.0"]) == 0
    assert _log(tmp_path, "pip.log")[-1] == "install -q -c constraints/pipeline.txt torch==2.13.0"
    assert why in capfd.readouterr().err
    if config is None or "no-binary" in config:
        assert _log(tmp_path, "uv.log") == []  # never tried without all of pip's sources


def test_the_makefile_and_the_adk_environment_install_through_it() -> None:
    makefile = (PROJECT / "Makefile").read_text()
    recipe = makefile.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "$(PYTHON) tools/install.py $(VENV) -q -c constraints/pipeline.txt torch==2.13.0" in recipe
    assert "$(PYTHON) tools/install.py $(VENV) -q -c constraints/pipeline.txt -e '.[dev]'" in recipe
    assert "$(BIN)/pip install" not in recipe
    adk = (PROJECT / "benchmarks" / "make_adk_env.sh").read_text()
    assert 'tools/install.py "$VENV" -q -c constraints/adk.txt' in adk and '"$VENV/bin/pip" install' not in adk
    assert os.access(PROJECT / "tools" / "install.py", os.R_OK)
