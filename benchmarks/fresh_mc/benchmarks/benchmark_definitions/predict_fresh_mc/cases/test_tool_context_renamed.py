from google.adk.tools import FunctionTool
from google.adk.tools.tool_context import ToolContext


def lookup_order(order_id: str, ctx: ToolContext) -> dict:
    """Looks up an order by its id for the current user."""
    return {"order_id": order_id, "status": "shipped"}


# --8<-- [start:tool_context_renamed]
def code_under_test():
    tool = FunctionTool(lookup_order)
    declaration = tool._get_declaration()
    print(declaration.name)
    return declaration


# --8<-- [end:tool_context_renamed]


def test_tool_context_renamed():
    """Expected on google-adk 2.13: the ToolContext parameter is recognised by its annotation and hidden from the model."""
    declaration = code_under_test()
    assert declaration.name == "lookup_order"
    assert sorted(declaration.parameters_json_schema["properties"]) == ["order_id"]
