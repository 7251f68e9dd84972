"""Paths the tests share, independent of the directory pytest runs from."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "configs" / "campaigns" / "demo.yaml"
LLAMA = REPO / "configs" / "campaigns" / "llama3-405b.yaml"
