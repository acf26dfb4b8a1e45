"""Options into claims: the claim model and the claim kinds, each read from the question and the options only."""
