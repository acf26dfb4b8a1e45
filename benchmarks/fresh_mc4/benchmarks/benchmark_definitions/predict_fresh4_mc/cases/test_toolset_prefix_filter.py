import asyncio

from google.adk.tools import FunctionTool
from google.adk.tools.base_toolset import BaseToolset


def get_weather(city: str) -> dict:
    """Returns today's weather in a city."""
    return {"city": city, "weather": "sunny"}


def get_forecast(city: str, days: int = 3) -> dict:
    """Returns the weather forecast for a city."""
    return {"city": city, "days": days}


class WeatherToolset(BaseToolset):
    """Offers ``get_weather`` and ``get_forecast``, keeping those the base class's ``tool_filter`` selects."""

    async def get_tools(self, readonly_context=None):
        tools = [FunctionTool(get_weather), FunctionTool(get_forecast)]
        return [tool for tool in tools if self._is_tool_selected(tool, readonly_context)]


# --8<-- [start:toolset_prefix_filter]
async def code_under_test():
    every = WeatherToolset(tool_name_prefix="wx")
    chosen = WeatherToolset(tool_filter=["get_forecast", "wx_get_weather"], tool_name_prefix="wx")
    print([tool.name for tool in await every.get_tools_with_prefix()])
    print([tool.name for tool in await chosen.get_tools_with_prefix()])


# --8<-- [end:toolset_prefix_filter]


def test_toolset_prefix_filter(capsys):
    """Expected: the prefix is joined with an underscore; the filter matches the names before the prefix."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.split("\n")[:2] == ["['wx_get_weather', 'wx_get_forecast']", "['wx_get_forecast']"]
