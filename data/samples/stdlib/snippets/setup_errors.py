"""Snippets for the "diagnose setup errors" sample questions (multiple_choice.yaml, code_snippet_ref).

Each section is cut out by its mkdocs-snippets markers and run on its own; this file is never imported.
"""

# --8<-- [start:dataclass_mutable_default]
from dataclasses import dataclass


@dataclass
class Basket:
    items: list = []
# --8<-- [end:dataclass_mutable_default]


# --8<-- [start:json_set]
import json

payload = json.dumps({"ids": {1, 2}})
# --8<-- [end:json_set]


# --8<-- [start:unique_enum]
from enum import Enum, unique


@unique
class Colour(Enum):
    RED = 1
    CRIMSON = 1
# --8<-- [end:unique_enum]
