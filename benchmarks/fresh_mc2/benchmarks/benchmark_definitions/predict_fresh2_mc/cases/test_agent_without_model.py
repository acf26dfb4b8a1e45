from google.adk.agents import LlmAgent


# --8<-- [start:agent_without_model]
def code_under_test():
    solo = LlmAgent(name="solo", instruction="Answer in one sentence.")
    print(repr(solo.model))
    print(solo.canonical_model.model)


# --8<-- [end:agent_without_model]


def test_agent_without_model(capsys):
    """Expected on google-adk 2.13: a top-level agent without a model falls back to the built-in default model."""
    code_under_test()
    assert capsys.readouterr().out.splitlines() == ["''", LlmAgent.DEFAULT_MODEL]
