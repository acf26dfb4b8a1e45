from google.adk.models.llm_request import LlmRequest
from pydantic import BaseModel


class Forecast(BaseModel):
    city: str
    celsius: float


# --8<-- [start:output_schema_request]
def code_under_test():
    request = LlmRequest(model="gemini-2.0-flash")
    request.set_output_schema(Forecast)
    print(request.config.response_mime_type, request.config.response_schema is Forecast)


# --8<-- [end:output_schema_request]


def test_output_schema_request(capsys):
    code_under_test()
    assert capsys.readouterr().out == "application/json True\n"
