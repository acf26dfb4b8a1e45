"""Retriever plug-ins that misbehave, for the worker-process tests (standard library only: a worker imports it fast)."""

from __future__ import annotations

import os
import sys
import time


class Fine:
    def build(self, doc_ids: list[str], texts: list[str]) -> None:
        self.doc_ids = doc_ids

    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        return [[(self.doc_ids[0], 1.0)] for _ in queries]


class ExitsInSearch(Fine):
    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        os._exit(0)


class SysExitsInSearch(Fine):
    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        sys.exit(0)


class SleepsInSearch(Fine):
    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        time.sleep(600)
        return []


class ExitsInBuild(Fine):
    def build(self, doc_ids: list[str], texts: list[str]) -> None:
        os._exit(7)


def sleeps_in_factory() -> Fine:
    time.sleep(600)
    return Fine()
