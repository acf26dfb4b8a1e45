"""Code snippets for the 'diagnose_fresh8_mc' questions.

Each snippet holds a setup mistake (or looks as if it did). Sections hold only the code under test; the imports and the
helpers (a tool function `get_weather`, and `BrowserComputer`, a `BaseComputer` that implements every method by
recording the call) sit outside them, as in the upstream suites. The tests below pin down the behaviour on google-adk
2.13 (see ../../../truth.yaml for both library versions).
"""

import asyncio

import pytest
from google.adk.agents.run_config import RunConfig
from google.adk.artifacts.file_artifact_service import FileArtifactService
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.models.llm_request import LlmRequest
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools.bigquery.bigquery_credentials import BigQueryCredentialsConfig
from google.adk.tools.bigquery.config import BigQueryToolConfig, WriteMode
from google.adk.tools.computer_use.base_computer import BaseComputer, ComputerEnvironment, ComputerState
from google.adk.tools.computer_use.computer_use_toolset import ComputerUseToolset
from google.adk.tools.enterprise_search_tool import EnterpriseWebSearchTool
from google.adk.tools.retrieval.vertex_ai_rag_retrieval import VertexAiRagRetrieval
from google.genai import types
from pydantic import ValidationError


def get_weather(city: str) -> dict:
    """Returns the current weather of a city."""
    return {"city": city, "sky": "clear"}


class BrowserComputer(BaseComputer):
    """Implements every method of BaseComputer; each records its call and returns the same blank state."""

    def __init__(self):
        self.calls = []

    def _state(self, name):
        self.calls.append(name)
        return ComputerState(screenshot=b"", url="about:blank")

    async def screen_size(self):
        return (1280, 800)

    async def environment(self):
        return ComputerEnvironment.ENVIRONMENT_BROWSER

    async def current_state(self):
        return self._state("current_state")

    async def open_web_browser(self):
        return self._state("open_web_browser")

    async def click_at(self, x, y):
        return self._state("click_at")

    async def hover_at(self, x, y):
        return self._state("hover_at")

    async def type_text_at(self, x, y, text, press_enter=True, clear_before_typing=True):
        return self._state("type_text_at")

    async def scroll_document(self, direction):
        return self._state("scroll_document")

    async def scroll_at(self, x, y, direction, magnitude):
        return self._state("scroll_at")

    async def wait(self, seconds):
        return self._state("wait")

    async def go_back(self):
        return self._state("go_back")

    async def go_forward(self):
        return self._state("go_forward")

    async def search(self):
        return self._state("search")

    async def navigate(self, url):
        return self._state("navigate")

    async def key_combination(self, keys):
        return self._state("key_combination")

    async def drag_and_drop(self, x, y, destination_x, destination_y):
        return self._state("drag_and_drop")


# --8<-- [start:bq_config_unknown_field]
def snippet_bq_config_unknown_field():
    return BigQueryToolConfig(write_mode=WriteMode.BLOCKED, max_rows=200)


# --8<-- [end:bq_config_unknown_field]


# --8<-- [start:bq_write_mode_string]
def snippet_bq_write_mode_string():
    config = BigQueryToolConfig(write_mode="allowed")
    return config.write_mode


# --8<-- [end:bq_write_mode_string]


# --8<-- [start:bq_credentials_half_pair]
def snippet_bq_credentials_half_pair():
    return BigQueryCredentialsConfig(client_id="1234.apps.googleusercontent.com")


# --8<-- [end:bq_credentials_half_pair]


# --8<-- [start:sqlite_session_url]
async def snippet_sqlite_session_url():
    service = SqliteSessionService("sqlite:///sessions.db")
    session = await service.create_session(app_name="shop", user_id="user_42")
    return session.app_name


# --8<-- [end:sqlite_session_url]


# --8<-- [start:file_artifact_parent_dir]
async def snippet_file_artifact_parent_dir():
    service = FileArtifactService(root_dir="artifacts")
    return await service.save_artifact(
        app_name="reports",
        user_id="user_42",
        session_id="s1",
        filename="../shared/report.txt",
        artifact=types.Part(text="Q3 revenue: 1.2M"),
    )


# --8<-- [end:file_artifact_parent_dir]


# --8<-- [start:computer_use_positional]
def snippet_computer_use_positional():
    return ComputerUseToolset(BrowserComputer())


# --8<-- [end:computer_use_positional]


# --8<-- [start:append_plain_function]
def snippet_append_plain_function():
    request = LlmRequest(model="gemini-2.0-flash")
    request.append_tools([get_weather])
    return list(request.tools_dict)


# --8<-- [end:append_plain_function]


# --8<-- [start:rag_retrieval_without_description]
def snippet_rag_retrieval_without_description():
    return VertexAiRagRetrieval(
        name="search_handbook",
        rag_corpora=["projects/acme/locations/us-central1/ragCorpora/42"],
        similarity_top_k=5,
    )


# --8<-- [end:rag_retrieval_without_description]


# --8<-- [start:window_compression_flag]
def snippet_window_compression_flag():
    return RunConfig(context_window_compression=True, max_llm_calls=50)


# --8<-- [end:window_compression_flag]


# --8<-- [start:enterprise_search_named]
def snippet_enterprise_search_named():
    return EnterpriseWebSearchTool(name="company_search")


# --8<-- [end:enterprise_search_named]


def test_bq_config_unknown_field():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        snippet_bq_config_unknown_field()


def test_bq_write_mode_string():
    assert snippet_bq_write_mode_string() is WriteMode.ALLOWED


def test_bq_credentials_half_pair():
    with pytest.raises(ValidationError, match="Must provide one of credentials, external_access_token_key"):
        snippet_bq_credentials_half_pair()


def test_sqlite_session_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert asyncio.run(snippet_sqlite_session_url()) == "shop"
    assert [p.name for p in tmp_path.iterdir()] == ["sessions.db"]


def test_file_artifact_parent_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputValidationError, match=r"must not contain parent traversal"):
        asyncio.run(snippet_file_artifact_parent_dir())


def test_computer_use_positional():
    with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
        snippet_computer_use_positional()


def test_append_plain_function():
    with pytest.raises(AttributeError, match="'function' object has no attribute '_get_declaration'"):
        snippet_append_plain_function()


def test_rag_retrieval_without_description():
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'description'"):
        snippet_rag_retrieval_without_description()


def test_window_compression_flag():
    with pytest.raises(ValidationError, match="valid dictionary or object to extract fields from"):
        snippet_window_compression_flag()


def test_enterprise_search_named():
    with pytest.raises(TypeError, match="unexpected keyword argument 'name'"):
        snippet_enterprise_search_named()
