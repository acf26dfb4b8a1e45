"""A proof's last statement: installs the guard (:mod:`.guard`) once every function of the proof is defined.

Runs INSIDE the sandbox. This file is read as text and appended at the END of each proof
(:func:`~retrieval_pipeline.core.verifier.proofs.proof_source.compose`), so the names it uses are the proof's own:
``_rp_guard_install`` from ``guard.py``, ``EVIDENCE`` and the imports from ``proof_prelude.py``. Only in the sandbox
(``RP_GUARD=1``): from then on only the proof's own code, called from its test, writes the evidence file.
"""
# ruff: noqa: F821 - the names are defined by the files this one is appended to

if os.environ.get("RP_GUARD") == "1":
    _RP_GUARDED = True
    _rp_guard_install(sys._getframe(0).f_code.co_filename, ("file", EVIDENCE), entry="test_option_", protected=(EVIDENCE,),
                      watched=(sys.modules[__name__], builtins, json), programs=("grep",))  # fmt: skip
