from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner


# --8<-- [start:runner_default_services]
def code_under_test():
    agent = LlmAgent(name="helper", model="gemini-2.0-flash", instruction="Be brief.")
    runner = InMemoryRunner(agent=agent)
    print(
        type(runner.session_service).__name__,
        type(runner.artifact_service).__name__,
        type(runner.memory_service).__name__,
    )


# --8<-- [end:runner_default_services]


def test_runner_default_services(capsys):
    """Expected: the in-memory runner makes an in-memory session, artifact and memory service."""
    code_under_test()
    assert capsys.readouterr().out.strip() == "InMemorySessionService InMemoryArtifactService InMemoryMemoryService"
