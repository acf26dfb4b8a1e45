"""Read a YAML file with errors that name the file, the line and the column, and with limits.

Every YAML input (suites, ranked targets, the dataset and retriever registries) goes through
:func:`read_yaml`, which refuses, with a short message naming the file and never echoing its content:

* a file over :func:`max_yaml_bytes` (20 MB unless ``RETRIEVAL_PIPELINE_MAX_YAML_BYTES`` says otherwise),
  checked before anything is read or parsed;
* nesting deeper than :data:`MAX_DEPTH` (the C parser would overflow the stack on ``[[[[...``; libyaml
  0.2.6 and later refuse flow nesting past 1,000 on their own, reported with the same message);
* aliases that would add more than :data:`MAX_ALIAS_NODES` nodes when expanded (a "billion laughs"
  bomb is refused after a few hundred events), and recursive aliases;
* aliases that would add more than :data:`MAX_ALIAS_CHARS` characters of scalar text when expanded (one
  1 MB scalar anchored once and aliased 3,000 times is few nodes but 3 GB of text once dumped as JSON);
* a value that cannot be built, such as an integer of more than 4,300 digits;
* more than :func:`max_yaml_nodes` nodes (2,000,000 unless ``RETRIEVAL_PIPELINE_MAX_YAML_NODES`` says
  otherwise), aliases expanded: PyYAML builds a node graph of a few hundred bytes per node before any
  Python value, so 19 MB of one-character items (``[a,a,a,...]``, 9.5 million nodes) took 3.3 GB and three
  minutes to load; 2,000,000 nodes cost about 700 MB at most, and a 20 MB suite of ordinary rows has ~1.1 million.
* a key given twice in one mapping (a case with ``question:`` twice, two datasets of one name): YAML
  loaders keep the last one silently; here the file is refused, naming both lines.

Anchors and aliases themselves stay allowed: the project's registry shares one thresholds block with
``&sample_thresholds`` / ``*sample_thresholds``. Both checks run on the parser's event stream, before a
single node is built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from retrieval_pipeline.core.common.errors import InputError
from retrieval_pipeline.core.common.paths import PathRefused, read_bounded

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when PyYAML has it

#: Default size limit of a YAML file, in bytes.
DEFAULT_MAX_YAML_BYTES = 20 * 1024 * 1024
#: Environment variable that overrides :data:`DEFAULT_MAX_YAML_BYTES`.
MAX_YAML_BYTES_ENV = "RETRIEVAL_PIPELINE_MAX_YAML_BYTES"
#: Deepest nesting of mappings and sequences accepted.
MAX_DEPTH = 100
#: Most nodes that aliases may add to a document when expanded.
MAX_ALIAS_NODES = 10_000
#: Most characters of scalar text that aliases may add to a document when expanded.
MAX_ALIAS_CHARS = 1_000_000
#: Default most nodes (scalars, sequences, mappings; aliases expanded) in a document.
DEFAULT_MAX_YAML_NODES = 2_000_000
#: Environment variable that overrides :data:`DEFAULT_MAX_YAML_NODES`.
MAX_YAML_NODES_ENV = "RETRIEVAL_PIPELINE_MAX_YAML_NODES"
#: Most characters of a parser message repeated in an error.
_MAX_MESSAGE = 300


def max_yaml_bytes() -> int:
    """The size limit: ``RETRIEVAL_PIPELINE_MAX_YAML_BYTES`` when set to a positive integer, else 20 MB."""
    value = os.environ.get(MAX_YAML_BYTES_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_YAML_BYTES


def max_yaml_nodes() -> int:
    """The node limit: ``RETRIEVAL_PIPELINE_MAX_YAML_NODES`` when set to a positive integer, else 2,000,000."""
    value = os.environ.get(MAX_YAML_NODES_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_MAX_YAML_NODES


def read_yaml(path: Path, what: str, *, max_bytes: int | None = None) -> Any:
    """Parse ``path``; unreadable, oversized, hostile files and syntax errors raise :class:`InputError`.

    Args:
        path: The YAML file.
        what: What the file is, for the message ("suite file", "ranked targets", ...).
        max_bytes: Size limit; default :func:`max_yaml_bytes`.
    """
    text = _read_text(Path(path), what, max_bytes or max_yaml_bytes())
    try:
        _check_events(text)
        return _load(text)
    except _Refused as exc:
        raise InputError(f"{what} refused: {exc}", path=str(path)) from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML syntax error{_position(exc)}: {_short(exc)}", path=str(path)) from None
    except RecursionError:
        raise InputError(f"{what} refused: nested too deeply to build", path=str(path)) from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits (Python's int/str conversion limit)
        raise InputError(f"{what} refused: a value cannot be built: {_short(exc)}", path=str(path)) from None


def _read_text(path: Path, what: str, max_bytes: int) -> str:
    """The file's text, its size checked before reading."""
    try:
        return read_bounded(path, what, max_bytes, limit_hint=f" (set by {MAX_YAML_BYTES_ENV})").decode("utf-8")
    except PathRefused as exc:
        raise InputError(exc.reason, path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what}: {_short(exc)}", path=str(path)) from exc


class _Refused(Exception):
    """The document is too deep or its aliases expand too far; the message says where."""


def _check_events(text: str) -> None:
    """Walk the event stream once: nesting depth, recursive aliases and alias expansion are bounded."""
    loader = _SafeLoader(text)
    try:
        _walk(loader)
    except yaml.YAMLError as exc:
        # libyaml 0.2.6 and later stop at flow depth 1000 while scanning ahead, before the walk sees
        # depth MAX_DEPTH: the same refusal, whichever limit fires first
        if "nesting depth" in str(getattr(exc, "problem", "") or ""):
            raise _Refused(f"nesting deeper than {MAX_DEPTH} levels{_position(exc)}") from None
        raise
    finally:
        loader.dispose()


def _walk(loader: Any) -> None:
    max_nodes, nodes = max_yaml_nodes(), 0  # every node of the document, aliases expanded
    open_nodes: list[list[Any]] = []  # [expanded size so far, anchor, expanded characters so far] per open collection
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> expanded (nodes, characters) of its finished node
    added = added_chars = 0  # nodes and scalar characters added by aliases
    while True:
        event = loader.get_event()
        if isinstance(event, yaml.StreamEndEvent):
            return
        if isinstance(event, (yaml.CollectionStartEvent, yaml.ScalarEvent, yaml.AliasEvent)):
            nodes += _alias_size(event, sizes, open_nodes)[0] if isinstance(event, yaml.AliasEvent) else 1
            if nodes > max_nodes:
                raise _Refused(f"more than {max_nodes:,} nodes{_at(event)} (set by {MAX_YAML_NODES_ENV})")
        if isinstance(event, yaml.CollectionStartEvent):
            open_nodes.append([1, event.anchor, 0])
            if len(open_nodes) > MAX_DEPTH:
                raise _Refused(f"nesting deeper than {MAX_DEPTH} levels{_at(event)}")
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            size, anchor, chars = open_nodes.pop()
        elif isinstance(event, yaml.AliasEvent):
            (size, chars), anchor = _alias_size(event, sizes, open_nodes), None
            added += size
            added_chars += chars
            if added > MAX_ALIAS_NODES:
                raise _Refused(f"aliases expand to more than {MAX_ALIAS_NODES:,} extra nodes{_at(event)} (an alias bomb?)")
            if added_chars > MAX_ALIAS_CHARS:
                raise _Refused(f"aliases expand to more than {MAX_ALIAS_CHARS:,} extra characters{_at(event)} (an alias bomb?)")
        elif isinstance(event, yaml.ScalarEvent):
            size, anchor, chars = 1, event.anchor, len(event.value)
        else:
            continue
        if anchor is not None:
            sizes[anchor] = (size, chars)
        if open_nodes:
            open_nodes[-1][0] += size
            open_nodes[-1][2] += chars


def _alias_size(event: yaml.AliasEvent, sizes: dict[str, tuple[int, int]], open_nodes: list[list[Any]]) -> tuple[int, int]:
    """The expanded size of the aliased node; an alias to a node still open is recursive."""
    if any(anchor == event.anchor for _, anchor, _ in open_nodes):
        raise _Refused(f"recursive alias *{_name(event.anchor)}{_at(event)}")
    if event.anchor not in sizes:
        raise _Refused(f"undefined alias *{_name(event.anchor)}{_at(event)}")
    return sizes[event.anchor]


class _UniqueKeyLoader(_SafeLoader):  # type: ignore[misc,valid-type]
    """The safe loader, refusing a mapping that gives one key twice (merge keys ``<<`` may still be overridden)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first.setdefault(key, key_node)
                except TypeError:  # an unhashable key: the base constructor says so
                    break
                if earlier is not key_node:
                    raise _Refused(
                        f"duplicate key {_name(key)!r}{_at_node(key_node)} (first at line {earlier.start_mark.line + 1}): "
                        "the second would silently replace the first"
                    )
        return super().construct_mapping(node, deep=deep)


def _load(text: str) -> Any:
    """Build the single document (the checks have passed)."""
    loader = _UniqueKeyLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _at(event: yaml.Event) -> str:
    mark = event.start_mark
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _at_node(node: yaml.Node) -> str:
    mark = node.start_mark
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _name(anchor: object) -> str:
    return str(anchor)[:40]


def _short(exc: BaseException) -> str:
    """An exception's message cut to one short line (a parser message may quote a long token)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


def _position(exc: yaml.YAMLError) -> str:
    """The 1-based line and column of a YAML error, or '' when PyYAML gives none."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is None:
        return ""
    return f" at line {mark.line + 1}, column {mark.column + 1}"


def read_yaml_mapping(path: Path, what: str = "registry") -> dict[str, Any]:
    """Like :func:`read_yaml`, for a file whose top level must be a mapping (an empty file is ``{}``)."""
    doc = read_yaml(path, what)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InputError(f"the {what} must be a mapping at the top level, got {type(doc).__name__}", path=str(path))
    return doc
