"""Code snippets for the 'diagnose_fresh9_mc' questions.

Each snippet holds a setup mistake (or looks as if it did). Sections hold only the code under test; the imports sit
outside them, as in the upstream suites. Snippets that write an agents folder take it as an argument (an empty
folder). The tests below pin down the behaviour on google-adk 2.13 (see ../../../truth.yaml for both library versions).
"""

from pathlib import Path

import pytest
from google.adk.agents import LlmAgent
from google.adk.auth.auth_credential import AuthCredential, AuthCredentialTypes, HttpAuth, ServiceAccount
from google.adk.cli.utils.agent_loader import AgentLoader
from google.adk.errors.not_found_error import NotFoundError
from google.adk.evaluation.eval_case import EvalCase
from google.adk.evaluation.eval_metrics import EvalMetric, ToolTrajectoryCriterion
from google.adk.evaluation.in_memory_eval_sets_manager import InMemoryEvalSetsManager
from google.adk.evaluation.local_eval_sets_manager import LocalEvalSetsManager
from google.adk.evaluation.trajectory_evaluator import TrajectoryEvaluator
from google.adk.models.apigee_llm import ApigeeLlm
from google.adk.tools.openapi_tool.auth.auth_helpers import token_to_scheme_credential
from pydantic import ValidationError


# --8<-- [start:apigee_model_prefix]
def snippet_apigee_model_prefix():
    model = ApigeeLlm(model="gemini-2.5-flash", proxy_url="https://apigee.example.com/v1/gemini")
    return LlmAgent(name="assistant", model=model, instruction="Answer briefly.")


# --8<-- [end:apigee_model_prefix]


# --8<-- [start:token_scheme_bearer]
def snippet_token_scheme_bearer():
    auth_scheme, auth_credential = token_to_scheme_credential("bearer", "header", "Authorization", "s3cr3t-token")
    return auth_scheme, auth_credential


# --8<-- [end:token_scheme_bearer]


# --8<-- [start:agent_without_root_agent]
WEATHER_AGENT_PY = """
from google.adk.agents import LlmAgent

agent = LlmAgent(name="weather", model="gemini-2.0-flash", instruction="Answer weather questions.")
"""


def snippet_agent_without_root_agent(agents_dir: Path):
    (agents_dir / "weather").mkdir()
    (agents_dir / "weather" / "__init__.py").write_text("from . import agent\n")
    (agents_dir / "weather" / "agent.py").write_text(WEATHER_AGENT_PY)
    return AgentLoader(agents_dir=str(agents_dir)).load_agent("weather")


# --8<-- [end:agent_without_root_agent]


# --8<-- [start:eval_set_id_space]
def snippet_eval_set_id_space(agents_dir: Path):
    manager = LocalEvalSetsManager(agents_dir=str(agents_dir))
    eval_set = manager.create_eval_set(app_name="weather_agent", eval_set_id="smoke tests")
    return eval_set.eval_set_id


# --8<-- [end:eval_set_id_space]


# --8<-- [start:trajectory_threshold_and_metric]
def snippet_trajectory_threshold_and_metric():
    metric = EvalMetric(metric_name="tool_trajectory_avg_score", threshold=1.0)
    return TrajectoryEvaluator(threshold=1.0, eval_metric=metric)


# --8<-- [end:trajectory_threshold_and_metric]


# --8<-- [start:eval_case_before_set]
def snippet_eval_case_before_set():
    manager = InMemoryEvalSetsManager()
    manager.add_eval_case(
        app_name="weather_agent",
        eval_set_id="smoke_tests",
        eval_case=EvalCase(eval_id="oslo_forecast", conversation=[]),
    )
    return manager.get_eval_set(app_name="weather_agent", eval_set_id="smoke_tests")


# --8<-- [end:eval_case_before_set]


# --8<-- [start:trajectory_match_type_string]
def snippet_trajectory_match_type_string():
    criterion = ToolTrajectoryCriterion(threshold=1.0, match_type="IN_ORDER")
    return criterion.match_type


# --8<-- [end:trajectory_match_type_string]


# --8<-- [start:service_account_scopes_only]
def snippet_service_account_scopes_only():
    return AuthCredential(
        auth_type=AuthCredentialTypes.SERVICE_ACCOUNT,
        service_account=ServiceAccount(scopes=["https://www.googleapis.com/auth/cloud-platform"]),
    )


# --8<-- [end:service_account_scopes_only]


# --8<-- [start:http_token_on_auth]
def snippet_http_token_on_auth():
    return AuthCredential(
        auth_type=AuthCredentialTypes.HTTP,
        http=HttpAuth(scheme="bearer", token="s3cr3t-token"),
    )


# --8<-- [end:http_token_on_auth]


# --8<-- [start:agent_folder_hyphen]
BILLING_AGENT_PY = """
from google.adk.agents import LlmAgent

root_agent = LlmAgent(name="billing", model="gemini-2.0-flash", instruction="Answer billing questions.")
"""


def snippet_agent_folder_hyphen(agents_dir: Path):
    (agents_dir / "billing-agent").mkdir()
    (agents_dir / "billing-agent" / "__init__.py").write_text("from . import agent\n")
    (agents_dir / "billing-agent" / "agent.py").write_text(BILLING_AGENT_PY)
    return AgentLoader(agents_dir=str(agents_dir)).load_agent("billing-agent").name


# --8<-- [end:agent_folder_hyphen]


def test_apigee_model_prefix():
    with pytest.raises(ValueError, match="Invalid model string: gemini-2.5-flash"):
        snippet_apigee_model_prefix()


def test_token_scheme_bearer():
    with pytest.raises(ValueError, match=r"Invalid security scheme type: <class 'type'>"):
        snippet_token_scheme_bearer()


def test_agent_without_root_agent(tmp_path):
    with pytest.raises(ValueError, match=r"No root_agent found for 'weather'\. Searched in 'weather\.agent\.root_agent'"):
        snippet_agent_without_root_agent(tmp_path)


def test_eval_set_id_space(tmp_path):
    with pytest.raises(ValueError, match=r"Invalid Eval Set ID\. Eval Set ID should have the `\^\[a-zA-Z0-9_\]\+\$` format"):
        snippet_eval_set_id_space(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_trajectory_threshold_and_metric():
    with pytest.raises(ValueError, match="Either eval_metric should be specified or threshold should be specified"):
        snippet_trajectory_threshold_and_metric()


def test_eval_case_before_set():
    with pytest.raises(NotFoundError, match="EvalSet smoke_tests not found for app weather_agent"):
        snippet_eval_case_before_set()


def test_trajectory_match_type_string():
    assert snippet_trajectory_match_type_string() is ToolTrajectoryCriterion.MatchType.IN_ORDER


def test_service_account_scopes_only():
    with pytest.raises(ValidationError, match="service_account_credential is required when use_default_credential is False"):
        snippet_service_account_scopes_only()


def test_http_token_on_auth():
    with pytest.raises(ValidationError, match=r"HttpAuth\ncredentials\n  Field required"):
        snippet_http_token_on_auth()


def test_agent_folder_hyphen(tmp_path):
    with pytest.raises(ValueError, match="Invalid agent name: 'billing-agent'"):
        snippet_agent_folder_hyphen(tmp_path)
