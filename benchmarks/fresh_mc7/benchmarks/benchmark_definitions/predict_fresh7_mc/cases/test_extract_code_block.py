from google.adk.code_executors.code_execution_utils import CodeExecutionUtils
from google.genai import types


# --8<-- [start:extract_code_block]
def code_under_test():
    reply = "Let me compute.\n```python\nprint(2 + 2)\n```\nDone."
    content = types.Content(role="model", parts=[types.Part(text=reply)])
    code = CodeExecutionUtils.extract_code_and_truncate_content(content, [("```python\n", "\n```")])
    print(repr(code), [part.text for part in content.parts])


# --8<-- [end:extract_code_block]


def test_extract_code_block(capsys):
    code_under_test()
    assert capsys.readouterr().out == "'print(2 + 2)' ['Let me compute.\\n', None]\n"
