from google.adk.agents import LlmAgent, SequentialAgent


# --8<-- [start:agent_tree]
def code_under_test():
    faq = LlmAgent(name="faq", model="gemini-2.5-flash", instruction="Answer frequently asked questions.")
    support = SequentialAgent(name="support", sub_agents=[faq])
    desk = SequentialAgent(name="desk", sub_agents=[support])
    print(faq.root_agent.name, faq.parent_agent.name, desk.find_sub_agent("desk"))


# --8<-- [end:agent_tree]


def test_agent_tree(capsys):
    """Expected: root_agent is the top of the tree; find_sub_agent searches only below the agent."""
    code_under_test()
    assert capsys.readouterr().out.strip() == "desk support None"
