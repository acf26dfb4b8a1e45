"""A parameter's documentation read from the ``Args:``/``Attributes:`` section of a docstring
(``read_docs.section_texts``), in this process on fakes, only when nothing else documents it."""

from __future__ import annotations

import pytest


def run_async(user_id, new_message=None, state_delta=None):
    """Main entry method.

    Args:
      user_id: The user ID of the session.
      new_message: A new message to append to the
        session, as the user's input.
      state_delta: Optional state changes.

    Yields:
      new_message: not a parameter entry (another section).
    """


class Documented:
    """A runner.

    Attributes:
        app_name (str): The app name of the runner.
    """

    def __init__(self, app_name=None, plugins=None):
        """Builds it.

        Args:
            plugins: A list of plugins.
        """


class Described:
    app_name: str = ""
    """The name from the class body."""

    def __init__(self, app_name=""):
        """Args:
        app_name: The name from the Args section.
        """


def test_an_args_entry_is_the_documentation_of_a_parameter() -> None:
    from retrieval_pipeline.core.verifier.sandbox_side import read_docs

    assert read_docs.documented_entry(run_async.__doc__, "new_message") == (
        "A new message to append to the session, as the user's input."
    )  # the continuation line, and not the Yields section's entry
    assert read_docs.documented_entry(run_async.__doc__, "user") == ""  # a prefix of a name is not the name
    assert read_docs.documented_entry(":param str app_name: The name.\n:param x: Other.", "app_name") == "The name."
    assert read_docs.section_texts(Documented, "app_name") == ["The app name of the runner."]
    assert read_docs.section_texts(Documented, "plugins") == ["A list of plugins."]
    assert read_docs.section_texts(Documented, "session") == []


def test_the_args_section_is_read_only_when_nothing_else_documents_the_member(monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval_pipeline.core.verifier.sandbox_side import read_docs

    fake = {"tests.Documented": Documented, "tests.Described": Described, "tests.run_async": run_async}
    monkeypatch.setattr(read_docs, "load", lambda path: fake[path])
    assert read_docs.read({"path": "tests.run_async", "member": "new_message"})[0].startswith("A new message")
    assert read_docs.read({"path": "tests.Documented", "member": "app_name"}) == ["The app name of the runner."]
    assert read_docs.read({"path": "tests.Described", "member": "app_name"}) == ["The name from the class body."]
    with pytest.raises(AttributeError):
        read_docs.read({"path": "tests.run_async", "member": "session_id"})
