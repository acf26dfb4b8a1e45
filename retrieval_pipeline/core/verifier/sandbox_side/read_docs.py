"""Read what the library's own documentation says about one class or member. Runs INSIDE the sandbox.

Reads ``docs_request.json`` (``{"path": "google.adk.agents.run_config.RunConfig", "member": "max_llm_calls" | null}``)
and writes ``member.docs.json``: ``{"found": bool, "texts": [...], "error": ...}``. The texts are the class's
docstring, or for a member: its attribute docstring (the string literal after the field in the class body, in the
class or a base), its pydantic ``Field(description=...)``, or the docstring of the property or method of that name; and
when none of those says anything, its entry in an ``Args:``/``Attributes:`` section (or a reST ``:param:``) of the
docstrings that list parameters: a method's own for its parameter (``Runner.run_async``'s ``new_message``), a class's
and its ``__init__``'s (in its bases too) for a field.
"""

import ast
import importlib
import inspect
import json
import re
import textwrap

REQUEST = "docs_request.json"
OUTPUT = "member.docs.json"


def load(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def attribute_docstrings(cls, member):
    texts = []
    for klass in inspect.getmro(cls):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for i, node in enumerate(body[:-1]):
            target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
            following = body[i + 1]
            if isinstance(target, ast.Name) and target.id == member and isinstance(following, ast.Expr):
                if isinstance(following.value, ast.Constant) and isinstance(following.value.value, str):
                    texts.append(following.value.value)
    return texts


#: A section of a Google-style docstring that lists names: ``Args:``, ``Attributes:``, ...
_SECTION = re.compile(r"^(\s*)(?:Args|Arguments|Parameters|Params|Attributes|Keyword Args|Keyword Arguments|Fields):\s*$")
#: One entry of such a section: ``name (type): text`` or ``name: text``.
_ENTRY = re.compile(r"^\s*\*{0,2}([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def documented_entry(doc, member):
    """What a docstring's ``Args:``/``Attributes:`` section (or a reST ``:param member:``) says of ``member``: its entry's
    text with its continuation lines, "" when it has none."""
    if not doc:
        return ""
    lines, out, i = doc.splitlines(), [], 0
    while i < len(lines):
        section = _SECTION.match(lines[i])
        i += 1
        if not section:
            continue
        base, entry_indent, current = len(section.group(1)), None, None
        while i < len(lines):
            line = lines[i]
            indent = len(line) - len(line.lstrip())
            if line.strip() and indent <= base:
                break
            if line.strip():
                entry_indent = indent if entry_indent is None else entry_indent
                entry = _ENTRY.match(line) if indent == entry_indent else None
                if indent == entry_indent:
                    current = entry.group(1) if entry else None
                    if current == member:
                        out.append(entry.group(2))
                elif current == member:
                    out.append(line.strip())
            i += 1
    out += re.findall(r":param\s+(?:[\w\[\], .]+\s+)?" + re.escape(member) + r":\s*([^\n]*)", doc)
    return " ".join(t for t in out if t.strip()).strip()


def section_texts(obj, member):
    """The entries for ``member`` in the docstrings that list parameters: a callable's own, or a class's and its
    ``__init__``'s (for a class, in its bases too)."""
    owners = inspect.getmro(obj) if inspect.isclass(obj) else (obj,)
    docs = []
    for owner in owners:
        if owner is object:
            continue
        docs.append(inspect.getdoc(owner) if not inspect.isclass(owner) else owner.__doc__)
        init = vars(owner).get("__init__") if inspect.isclass(owner) else None
        if init is not None:
            docs.append(getattr(init, "__doc__", None))
    texts = []
    for doc in docs:
        entry = documented_entry(inspect.cleandoc(doc) if isinstance(doc, str) else "", member)
        if entry and entry not in texts:
            texts.append(entry)
    return texts


def read(request):
    obj = load(request["path"])
    member = request.get("member")
    if not member:
        doc = inspect.getdoc(obj)
        return [doc] if doc else []
    texts = attribute_docstrings(obj, member) if inspect.isclass(obj) else []
    fields = getattr(obj, "model_fields", None) or {}
    if member in fields and getattr(fields[member], "description", None):
        texts.append(fields[member].description)
    attribute = inspect.getattr_static(obj, member, None)
    if isinstance(attribute, property) and attribute.__doc__:
        texts.append(attribute.__doc__)
    elif callable(attribute) and getattr(attribute, "__doc__", None) and not inspect.isclass(attribute):
        texts.append(attribute.__doc__)
    if not texts:  # nothing beside the member itself: what a docstring's Args/Attributes section says of it
        texts = section_texts(obj, member)
    if not texts and member not in fields and not hasattr(obj, member):
        raise AttributeError(f"{request['path']} has no member {member!r}")
    return texts


def main():
    with open(REQUEST, encoding="utf-8") as handle:
        request = json.load(handle)
    try:
        out = {"found": True, "texts": [" ".join(str(t).split())[:4000] for t in read(request)], "error": None}
    except Exception as exc:
        out = {"found": False, "texts": [], "error": type(exc).__name__ + ": " + str(exc)[:500]}
    with open(OUTPUT, "w", encoding="utf-8") as handle:
        json.dump(out, handle)


if __name__ == "__main__":
    main()
