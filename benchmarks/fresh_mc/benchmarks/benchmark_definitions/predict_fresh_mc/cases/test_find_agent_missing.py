from google.adk.agents import LlmAgent, SequentialAgent


# --8<-- [start:find_agent_missing]
def code_under_test():
    billing = LlmAgent(name="billing", model="gemini-2.5-flash")
    shipping = LlmAgent(name="shipping", model="gemini-2.5-flash")
    root = SequentialAgent(name="root", sub_agents=[billing, shipping])
    print(root.find_agent("shipping").parent_agent.name)
    print(root.find_agent("refunds"))
    return root


# --8<-- [end:find_agent_missing]


def test_find_agent_missing(capsys):
    """Expected: find_agent searches the tree; an unknown name gives None."""
    code_under_test()
    assert capsys.readouterr().out.splitlines() == ["root", "None"]
