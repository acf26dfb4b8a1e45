import subprocess

import pytest

from fixed import run_python


def test_returns_printed_text():
    assert run_python("print(6 * 7)") == "42"


def test_multiline_output():
    assert run_python("print('a'); print('b')") == "a\nb"


def test_failure_raises():
    with pytest.raises(subprocess.CalledProcessError):
        run_python("import sys; sys.exit(3)")
