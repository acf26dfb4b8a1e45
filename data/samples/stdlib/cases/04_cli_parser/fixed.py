"""Command-line interface for a tool that prints the first lines of a file."""

import argparse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="peek", description="Show the first lines of a file.")
    parser.add_argument("path", help="file to read")
    parser.add_argument("-n", "--count", type=int, default=10, help="how many lines to show")
    parser.add_argument("-v", "--verbose", action="store_true", help="print extra details")
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.count < 1:
        raise SystemExit("--count must be at least 1")
    return args
