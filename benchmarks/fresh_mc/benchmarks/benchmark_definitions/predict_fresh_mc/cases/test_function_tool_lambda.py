from google.adk.tools import FunctionTool


# --8<-- [start:function_tool_lambda]
def code_under_test():
    tool = FunctionTool(lambda city: {"city": city, "forecast": "sunny"})
    print(tool.name)
    return tool


# --8<-- [end:function_tool_lambda]


def test_function_tool_lambda():
    """Expected: the tool is named after the function's __name__, which for a lambda is '<lambda>'."""
    assert code_under_test().name == "<lambda>"
