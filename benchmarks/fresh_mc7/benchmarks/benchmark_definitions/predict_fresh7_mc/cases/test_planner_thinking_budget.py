from google.adk.models.llm_request import LlmRequest
from google.adk.planners import BuiltInPlanner
from google.genai import types


# --8<-- [start:planner_thinking_budget]
def code_under_test():
    request = LlmRequest(config=types.GenerateContentConfig(thinking_config=types.ThinkingConfig(thinking_budget=50)))
    planner = BuiltInPlanner(thinking_config=types.ThinkingConfig(thinking_budget=1024))
    planner.apply_thinking_config(request)
    print(request.config.thinking_config.thinking_budget)


# --8<-- [end:planner_thinking_budget]


def test_planner_thinking_budget(capsys):
    code_under_test()
    assert capsys.readouterr().out == "1024\n"
