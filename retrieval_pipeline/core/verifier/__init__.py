"""Verify multiple-choice benchmark questions by proving or disproving every option in a sandbox.

``claims`` (options -> claims, from question and options only) -> ``provers`` (claims -> pytest
files) -> ``sandbox`` (bubblewrap + limits) -> ``verdict`` (Valid / Ambiguous / Incorrect /
Unverifiable) -> ``remediation`` (re-verified fixes) -> ``report``. ``verify`` orchestrates.
"""
