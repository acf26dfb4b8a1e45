import asyncio

import pytest
from google.adk.artifacts import InMemoryArtifactService
from google.genai import types


# --8<-- [start:artifact_missing_version]
async def code_under_test():
    service = InMemoryArtifactService()
    for text in ["draft 1", "draft 2"]:
        await service.save_artifact(
            app_name="docs", user_id="user_42", session_id="s1", filename="memo.txt", artifact=types.Part(text=text)
        )
    part = await service.load_artifact(app_name="docs", user_id="user_42", session_id="s1", filename="memo.txt", version=2)
    print(part.text)


# --8<-- [end:artifact_missing_version]


def test_artifact_missing_version():
    """Expected: versions are 0 and 1; loading version 2 returns None, and reading .text on it fails."""
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'text'"):
        asyncio.run(code_under_test())
