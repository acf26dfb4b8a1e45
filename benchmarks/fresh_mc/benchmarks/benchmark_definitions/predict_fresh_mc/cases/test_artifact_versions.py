import asyncio

from google.adk.artifacts import InMemoryArtifactService
from google.genai import types


# --8<-- [start:artifact_versions]
async def code_under_test():
    service = InMemoryArtifactService()
    for text in ("draft", "final"):
        version = await service.save_artifact(
            app_name="docs",
            user_id="user_42",
            session_id="session_1",
            filename="memo.txt",
            artifact=types.Part(text=text),
        )
        print(version)
    versions = await service.list_versions(app_name="docs", user_id="user_42", session_id="session_1", filename="memo.txt")
    print(versions)
    return versions


# --8<-- [end:artifact_versions]


def test_artifact_versions():
    """Expected: versions count from 0 and each save adds one."""
    assert asyncio.run(code_under_test()) == [0, 1]
