from google.adk.events import Event
from google.genai import types


# --8<-- [start:event_function_calls]
def code_under_test():
    event = Event(
        author="planner",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="Let me check both."),
                types.Part(function_call=types.FunctionCall(name="get_weather", args={"city": "Oslo"})),
                types.Part(function_call=types.FunctionCall(name="get_time", args={"city": "Oslo"})),
            ],
        ),
    )
    print([call.name for call in event.get_function_calls()], len(event.get_function_responses()))


# --8<-- [end:event_function_calls]


def test_event_function_calls(capsys):
    """Expected: every function-call part is returned, in order, next to the text part."""
    code_under_test()
    assert capsys.readouterr().out.strip() == "['get_weather', 'get_time'] 0"
