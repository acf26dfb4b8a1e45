#!/usr/bin/env bash
# Create the separate environment that holds google-adk, the library under test for the ADK
# multiple-choice verifier acceptance test. It is kept apart from .venv so that google-adk's
# dependency pins never touch the pipeline's own environment.
#
#   bash benchmarks/make_adk_env.sh                 # latest google-adk
#   ADK_VERSION=1.20.0 bash benchmarks/make_adk_env.sh   # the version the suite was written for
#
# The venv goes to .venvs/adk (override with ADK_VENV); it is not part of the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${ADK_VENV:-.venvs/adk}"
SPEC="google-adk${ADK_VERSION:+==$ADK_VERSION}"

start=$(date +%s)
"$PYTHON" -m venv "$VENV"
# the latest google-adk is held to constraints/adk.txt (what make test was proven on); a named version is not.
# tools/install.py: pip install, done by uv when it can be had (the same packages; see the Makefile's install)
if [ -z "${ADK_VERSION:-}" ]; then
  "$PYTHON" tools/install.py "$VENV" -q -c constraints/adk.txt "$SPEC" pytest
else
  "$PYTHON" tools/install.py "$VENV" -q "$SPEC" pytest
fi
end=$(date +%s)
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
print("google-adk", md.version("google-adk"))
PY
echo "install took $((end - start)) s; size $(du -sh "$VENV" | cut -f1)"
