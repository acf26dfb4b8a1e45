import asyncio

from google.adk.artifacts import InMemoryArtifactService
from google.genai import types


# --8<-- [start:user_scoped_artifact]
async def code_under_test():
    service = InMemoryArtifactService()
    avatar = types.Part.from_bytes(data=b"\x89PNG...", mime_type="image/png")
    await service.save_artifact(app_name="studio", user_id="user_42", session_id="session_1", filename="user:avatar.png", artifact=avatar)
    await service.save_artifact(
        app_name="studio", user_id="user_42", session_id="session_1", filename="draft.txt", artifact=types.Part(text="v1")
    )

    print(await service.list_artifact_keys(app_name="studio", user_id="user_42", session_id="session_2"))
    print(await service.list_artifact_keys(app_name="studio", user_id="user_7", session_id="session_1"))


# --8<-- [end:user_scoped_artifact]


def test_user_scoped_artifact(capsys):
    """Expected: a `user:` artifact is listed in the user's other sessions, not for another user."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.splitlines() == ["['user:avatar.png']", "[]"]
