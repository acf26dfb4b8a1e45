"""Services the stages call, below every stage: the LLM client and local server (:mod:`.llm`), the bubblewrap
sandbox (:mod:`.sandbox`), and models shipped as slices of several PyPI packages (:mod:`.split_packages`)."""
