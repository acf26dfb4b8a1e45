import asyncio
from pathlib import Path

from google.adk.artifacts.file_artifact_service import FileArtifactService
from google.genai import types


# --8<-- [start:file_artifact_text]
async def code_under_test(root: Path):
    service = FileArtifactService(root_dir=root)
    keys = dict(app_name="reports", user_id="ana", session_id="s1", filename="todo.md")
    await service.save_artifact(**keys, artifact=types.Part(text="- call Bob"))
    await service.save_artifact(**keys, artifact=types.Part(text="- call Bob\n- pay rent"))
    loaded = await service.load_artifact(**keys, version=0)
    print(repr(loaded.text), loaded.inline_data)


# --8<-- [end:file_artifact_text]


def test_file_artifact_text(tmp_path, capsys):
    asyncio.run(code_under_test(tmp_path))
    assert capsys.readouterr().out == "'- call Bob' None\n"
