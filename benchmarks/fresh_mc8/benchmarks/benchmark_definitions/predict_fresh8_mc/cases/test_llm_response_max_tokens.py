from google.adk.models.llm_response import LlmResponse
from google.genai import types


# --8<-- [start:llm_response_max_tokens]
def code_under_test():
    raw = types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(role="model", parts=[types.Part(text="The three largest moons are")]),
                finish_reason=types.FinishReason.MAX_TOKENS,
            )
        ]
    )
    response = LlmResponse.create(raw)
    print(response.error_code, response.content.parts[0].text, response.finish_reason)


# --8<-- [end:llm_response_max_tokens]


def test_llm_response_max_tokens(capsys):
    code_under_test()
    assert capsys.readouterr().out == "None The three largest moons are FinishReason.MAX_TOKENS\n"
