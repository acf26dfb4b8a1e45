import asyncio
import json

from google.adk.tools.openapi_tool import OpenAPIToolset

PET_SPEC = {
    "openapi": "3.0.0",
    "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "https://pets.example.com"}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List all pets",
                "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "ok"}},
            },
            "post": {"operationId": "createPet", "summary": "Create a pet", "responses": {"201": {"description": "ok"}}},
        }
    },
}


# --8<-- [start:openapi_tool_names]
async def code_under_test():
    toolset = OpenAPIToolset(spec_str=json.dumps(PET_SPEC), spec_str_type="json")
    tools = await toolset.get_tools()
    print([tool.name for tool in tools])


# --8<-- [end:openapi_tool_names]


def test_openapi_tool_names(capsys):
    """Expected: one tool per operation, named after its operationId in snake case."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.strip() == "['list_pets', 'create_pet']"
