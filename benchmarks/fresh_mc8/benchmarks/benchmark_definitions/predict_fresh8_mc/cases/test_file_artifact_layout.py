import asyncio
from pathlib import Path

from google.adk.artifacts.file_artifact_service import FileArtifactService
from google.genai import types


# --8<-- [start:file_artifact_layout]
async def code_under_test(root: Path):
    service = FileArtifactService(root_dir=root)
    await service.save_artifact(app_name="reports", user_id="ana", session_id="s1", filename="summary.txt", artifact=types.Part(text="v1"))
    files = sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())
    print(files)


# --8<-- [end:file_artifact_layout]


def test_file_artifact_layout(tmp_path, capsys):
    asyncio.run(code_under_test(tmp_path))
    assert capsys.readouterr().out == (
        "['apps/reports/users/ana/sessions/s1/artifacts/summary.txt/versions/0/metadata.json', "
        "'apps/reports/users/ana/sessions/s1/artifacts/summary.txt/versions/0/summary.txt']\n"
    )
