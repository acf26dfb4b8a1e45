from google.adk.models.llm_response import LlmResponse
from google.genai import types


# --8<-- [start:llm_response_no_candidates]
def code_under_test():
    response = LlmResponse.create(types.GenerateContentResponse(candidates=[]))
    print(response.error_code, response.error_message, response.content)


# --8<-- [end:llm_response_no_candidates]


def test_llm_response_no_candidates(capsys):
    code_under_test()
    assert capsys.readouterr().out == "None None parts=[] role='model'\n"
