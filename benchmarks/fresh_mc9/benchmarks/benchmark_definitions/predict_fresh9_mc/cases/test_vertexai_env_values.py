import os

from google.adk.utils.variant_utils import get_google_llm_variant


# --8<-- [start:vertexai_env_values]
def code_under_test():
    variants = []
    for value in ("True", "yes", "1"):
        os.environ["GOOGLE_GENAI_USE_VERTEXAI"] = value
        variants.append(get_google_llm_variant().name)
    print(variants)


# --8<-- [end:vertexai_env_values]


def test_vertexai_env_values(capsys, monkeypatch):
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "0")  # restored after the test
    monkeypatch.delenv("GOOGLE_GENAI_USE_ENTERPRISE", raising=False)  # 2.13 reads it first
    code_under_test()
    assert capsys.readouterr().out == "['VERTEX_AI', 'GEMINI_API', 'VERTEX_AI']\n"
