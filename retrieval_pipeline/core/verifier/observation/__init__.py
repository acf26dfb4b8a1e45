"""What the sandbox observes beyond proofs, decided on the host: a question's snippet run once, the library's documentation read once."""
