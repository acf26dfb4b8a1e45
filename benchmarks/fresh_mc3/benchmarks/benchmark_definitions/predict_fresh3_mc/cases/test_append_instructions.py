from google.adk.models import LlmRequest
from google.genai import types


# --8<-- [start:append_instructions]
def code_under_test():
    request = LlmRequest(
        model="gemini-2.5-flash",
        config=types.GenerateContentConfig(system_instruction="You are a travel agent."),
    )
    request.append_instructions(["Answer in French.", "Be brief."])
    print(repr(request.config.system_instruction))


# --8<-- [end:append_instructions]


def test_append_instructions(capsys):
    """Expected: the new instructions are appended to the existing text, each separated by a blank line."""
    code_under_test()
    assert capsys.readouterr().out.strip() == repr("You are a travel agent.\n\nAnswer in French.\n\nBe brief.")
