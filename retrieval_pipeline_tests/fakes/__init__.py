"""Test doubles that run on loopback only (no network beyond 127.0.0.1)."""
