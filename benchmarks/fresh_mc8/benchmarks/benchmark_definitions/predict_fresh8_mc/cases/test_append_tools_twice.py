from google.adk.models.llm_request import LlmRequest
from google.adk.tools import FunctionTool


def get_weather(city: str) -> dict:
    """Returns the current weather of a city."""
    return {"city": city, "sky": "clear"}


def get_time(city: str) -> dict:
    """Returns the local time of a city."""
    return {"city": city, "time": "09:30"}


# --8<-- [start:append_tools_twice]
def code_under_test():
    request = LlmRequest(model="gemini-2.0-flash")
    request.append_tools([FunctionTool(get_weather), FunctionTool(get_time)])
    request.append_tools([FunctionTool(get_weather)])
    declarations = [len(tool.function_declarations) for tool in request.config.tools]
    print(list(request.tools_dict), declarations)


# --8<-- [end:append_tools_twice]


def test_append_tools_twice(capsys):
    code_under_test()
    assert capsys.readouterr().out == "['get_weather', 'get_time'] [3]\n"
