"""Read what the library's own documentation says about one class or member. Runs INSIDE the sandbox.

Reads ``docs_request.json`` (``{"path": "google.adk.agents.run_config.RunConfig", "member": "max_llm_calls" | null}``)
and writes ``member.docs.json``: ``{"found": bool, "texts": [...], "error": ...}``. The texts are the class's
docstring, or for a member: its attribute docstring (the string literal after the field in the class body, in the
class or a base), its pydantic ``Field(description=...)``, or the docstring of the property or method of that name.
"""

import ast
import importlib
import inspect
import json
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
