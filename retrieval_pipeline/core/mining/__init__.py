"""Mining: turn benchmark cases into corpus targets (gold FQN resolution, fix-case subjects)."""
