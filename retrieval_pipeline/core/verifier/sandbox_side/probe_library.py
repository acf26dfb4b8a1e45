"""Probe the environment under test: the Python version, the library's version, and an index of the library.

Runs INSIDE the sandbox, in the library's interpreter, standard library only (see
:func:`~retrieval_pipeline.core.verifier.proofs.library_index.probe_environment`). Reads ``probe_request.json`` from
the working directory:

* ``distribution``: the distribution (``google-adk``), or null;
* ``import_name``: the module to probe (``google.adk``), or null to derive it from the distribution's file list
  (``RECORD``, else ``top_level.txt``);
* ``cpu_budget_s`` and ``wall_budget_s``: the import loop's time budget (CPU time binds; wall clock is a backstop).

Every module of the library is found on disk (nothing imported to find it), imported within the budget and
indexed (the classes and functions each exposes, the modules it imports under other names); then the source of
every module is read for what it defines at module level, and the modules not imported for the capitalised
words they mention. Writes ``environment.json``; a setting that names nothing probeable is reported there as
``error`` (the setting, its value and a message), never raised.
"""

import ast
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import sys
import time
import types
import warnings
from collections import Counter, defaultdict

REQUEST = "probe_request.json"
REPORT = "environment.json"
EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


class SettingError(Exception):
    """A setting names nothing the probe can index: the probe stops and reports it."""

    def __init__(self, setting, value, message):
        super().__init__(message)
        self.setting, self.value, self.message = setting, value, message


def describe(exc):
    return (type(exc).__name__ + ": " + str(exc))[:300]


def normal(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def module_name(parts):
    """Dotted module name of a file path inside site-packages, or None (not Python, not an identifier)."""
    *folders, filename = parts
    if filename.endswith(".py"):
        stem = filename[:-3]
    else:
        stem = next((filename[: -len(s)] for s in EXTENSIONS if filename.endswith(s)), None)
    if stem is None:
        return None
    names = folders if stem == "__init__" else folders + [stem]
    return ".".join(names) if names and all(n.isidentifier() for n in names) else None


def installed_roots(dist):
    """The import names a distribution installs, from RECORD (else top_level.txt): the shallowest regular packages."""
    files = [str(f).replace(os.sep, "/") for f in (dist.files or [])]
    skipped = ("__pycache__", ".dist-info/", ".egg-info/")
    files = [f for f in files if not f.startswith(("..", "/")) and not any(s in f for s in skipped)]
    packages = {f.rsplit("/", 1)[0] for f in files if f.endswith("/__init__.py")}
    roots = set()
    for f in files:
        parts = f.split("/")
        if module_name(parts) is None:
            continue
        if len(parts) == 1:
            roots.add(module_name(parts))
            continue
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in packages:  # folders above it without __init__.py are namespace packages
                roots.add(".".join(parts[:i]))
                break
    if roots:
        return sorted(roots), "RECORD"
    top = [line.strip() for line in (dist.read_text("top_level.txt") or "").splitlines() if line.strip()]
    return sorted(t for t in top if all(p.isidentifier() for p in t.split("."))), "top_level.txt"


def choose_root(roots, dist_name):
    """The one public root a distribution installs, or the one named like it; None when that is ambiguous."""
    public = [r for r in roots if not r.split(".")[-1].startswith("_") and r.split(".")[0] not in ("test", "tests")]
    if len(public) == 1:
        return public[0]
    matching = [r for r in public if normal(r) == normal(dist_name)]
    return matching[0] if len(matching) == 1 else None


def distribution_of(import_name):
    """The installed distribution whose files hold ``import_name`` (for the version report), or None."""
    top = import_name.split(".")[0]
    for name in importlib.metadata.packages_distributions().get(top, []):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        roots, _ = installed_roots(dist)
        if any(import_name == r or import_name.startswith(r + ".") for r in roots):
            return dist
    return None


def library_module(distribution, import_name, out):
    """Which module is the library: ``import_name``, checked against the distribution, or derived from it.

    Records the distribution, its version and where the import name came from in ``out``; returns the
    installed distribution (or None) and the import name (None for the standard library alone).
    """
    dist = None
    if distribution:
        try:
            dist = importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            hint = ""
            try:
                if not import_name and importlib.util.find_spec(distribution) is not None:
                    hint = (
                        f"; {distribution!r} is an importable module: set it as verifier.import_name, "
                        "and verifier.library to the distribution that installs it"
                    )
            except Exception:
                pass
            raise SettingError(
                "verifier.library",
                distribution,
                f"verifier.library {distribution!r} is not an installed distribution in {sys.executable} "
                f"(verifier.library is the name pip installs, e.g. google-adk){hint}",
            ) from None
    if dist is None:
        return None, import_name
    out["distribution"], out["version"] = dist.metadata["Name"], dist.version
    roots, source = installed_roots(dist)
    if import_name:
        related = [r for r in roots if import_name == r or import_name.startswith(r + ".") or r.startswith(import_name + ".")]
        if roots and not related:
            raise SettingError(
                "verifier.import_name",
                import_name,
                f"verifier.import_name {import_name!r} is not installed by verifier.library {distribution!r} "
                f"in {sys.executable}; that distribution installs: {', '.join(roots)}",
            )
        return dist, import_name
    import_name = choose_root(roots, out["distribution"])
    if import_name is None:
        raise SettingError(
            "verifier.import_name",
            None,
            f"cannot tell which module verifier.library {distribution!r} installs from its {source} in "
            f"{sys.executable} (found: {', '.join(roots) or 'none'}): set verifier.import_name",
        )
    out["import_name"], out["import_name_source"] = import_name, f"{source} of {out['distribution']}"
    return dist, import_name


def import_root(import_name, distribution, out):
    """Import the library's root module; a failure is a setting error naming the setting that chose it."""
    try:
        return importlib.import_module(import_name)
    except BaseException as exc:
        given = out["import_name_source"] == "verifier.import_name"
        setting = "verifier.import_name" if given else "verifier.library"
        what = (
            f"verifier.import_name {import_name!r}"
            if given
            else f"verifier.library {distribution!r} (import name {import_name!r}, from its {out['import_name_source']})"
        )
        raise SettingError(
            setting, import_name if given else distribution, f"{what} cannot be imported in {sys.executable}: {describe(exc)}"
        ) from None


def module_files(root, import_name):
    """Every module of the library, found on disk (nothing imported to find them): name -> file (or None)."""
    files = {import_name: getattr(root, "__file__", None)}
    for base in list(getattr(root, "__path__", None) or []):
        for folder, dirs, filenames in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d.isidentifier())
            rel = os.path.relpath(folder, base)
            prefix = [] if rel == "." else rel.split(os.sep)
            for filename in sorted(filenames):
                name = module_name(prefix + [filename])
                if name is not None and name.split(".")[-1] == "__main__":
                    continue  # importing it would run the program
                if name is not None:
                    full = import_name + ("." + name if name else "")
                    files.setdefault(full, os.path.join(folder, filename))
                elif filename == "__init__.py" and not prefix:
                    files[import_name] = os.path.join(folder, filename)
    return files


def import_modules(files, import_name, out, clock):
    """Import the modules within the time budget and index what they expose; the names of those imported.

    ``clock`` holds ``started``/``started_cpu`` and the ``cpu_budget_s``/``wall_budget_s`` budgets. Records in
    ``out`` the failures, the modules not reached, the budget hit, ``names`` and ``module_aliases``.
    """
    names, aliases = defaultdict(set), defaultdict(Counter)
    imported = set()
    for name in sorted(files):
        if out["budget_hit"] is None and name != import_name:  # the root is imported already: always indexed
            if time.process_time() - clock["started_cpu"] > clock["cpu_budget_s"]:
                out["budget_hit"] = "cpu"
            elif time.monotonic() - clock["started"] > clock["wall_budget_s"]:
                out["budget_hit"] = "wall_clock"
        if out["budget_hit"] is not None:
            out["not_reached"].append(name)
            continue
        try:
            module = importlib.import_module(name)
        except BaseException as exc:
            out["failed"][name] = describe(exc)
            continue
        imported.add(name)
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            if isinstance(value, types.ModuleType):
                aliases[attr][value.__name__] += 1
            elif isinstance(value, type) or callable(value):
                owner, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
                if isinstance(owner, str) and isinstance(qual, str) and "<" not in qual:
                    names[attr].add(owner + "." + qual)
    out["modules_imported"] = len(imported)
    out["names"] = {k: sorted(v) for k, v in names.items()}
    out["module_aliases"] = {k: c.most_common(1)[0][0] for k, c in aliases.items()}
    return imported


def module_level_defs(tree):
    """Names a module defines at module level (inside ``if``/``try``/``with``/loops too)."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.name)
        elif isinstance(node, ast.Assign):
            found += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.append(node.target.id)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or type(node).__name__ == "TryStar":
            for part in ("body", "orelse", "finalbody"):
                todo += getattr(node, part, [])
            for handler in getattr(node, "handlers", []):
                todo += handler.body
    return found


def read_sources(files, imported):
    """(name -> a module whose source defines it, capitalised word -> a module not imported that mentions it)."""
    defs, mentions = {}, {}
    for name in sorted(files):
        path = files[name]
        if not path or not path.endswith(".py"):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        try:
            for defined in module_level_defs(ast.parse(text)):
                defs.setdefault(defined, name)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            for a, b in re.findall(r"^(?:class|(?:async\s+)?def)\s+(\w+)|^(\w+)\s*[:=]", text, re.M):
                defs.setdefault(a or b, name)
        if name not in imported:
            for word in set(re.findall(r"\b_?[A-Z]\w*", text)):
                mentions.setdefault(word, name)
    return defs, mentions


def probe(config):
    """The report of one probe (what ``environment.json`` holds), for the request's settings."""
    clock = {"started": time.monotonic(), "started_cpu": time.process_time()}
    clock.update(cpu_budget_s=config["cpu_budget_s"], wall_budget_s=config["wall_budget_s"])
    import_name = config["import_name"]
    out = {
        "python_version": platform.python_version(),
        "python": sys.executable,
        "error": None,
        "import_name": import_name,
        "import_name_source": "verifier.import_name" if import_name else None,
        "distribution": None,
        "version": None,
        "names": {},
        "module_aliases": {},
        "source_defs": {},
        "unprobed_mentions": {},
        "modules_found": 0,
        "modules_imported": 0,
        "failed": {},
        "not_reached": [],
        "budget_hit": None,
    }
    try:
        dist, import_name = library_module(config["distribution"], import_name, out)
        if import_name:
            warnings.simplefilter("ignore")
            root = import_root(import_name, config["distribution"], out)
            if dist is None:
                found = distribution_of(import_name)
                if found is not None:
                    out["distribution"], out["version"] = found.metadata["Name"], found.version
            files = module_files(root, import_name)
            out["modules_found"] = len(files)
            imported = import_modules(files, import_name, out, clock)
            out["source_defs"], out["unprobed_mentions"] = read_sources(files, imported)
    except SettingError as exc:
        out["error"] = {"setting": exc.setting, "value": exc.value, "message": exc.message}
    out["seconds"] = round(time.monotonic() - clock["started"], 2)
    out["cpu_seconds"] = round(time.process_time() - clock["started_cpu"], 2)
    return out


def main():
    with open(REQUEST, encoding="utf-8") as handle:
        config = json.load(handle)
    out = probe(config)
    with open(REPORT, "w") as handle:
        json.dump(out, handle)


if __name__ == "__main__":
    main()
