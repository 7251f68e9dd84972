"""Prefect names carry the campaign: artifact keys through one helper, valid for Prefect."""

import ast
import re
from pathlib import Path

from tasks.artifacts import artifact_key, campaign_tag, slug

REPO = Path(__file__).resolve().parents[2]

# Keys that are not one campaign's, each with why.
NOT_PER_CAMPAIGN = {
    "tasks/analyse.py": "campaign-compare sets several campaigns side by side",
    "tasks/calendar.py": "a calendar belongs to a cluster, shared by campaigns; keyed by the cluster",
    "tasks/power.py": "the power notice is keyed by its config file's stem",
    "tasks/simulate.py": "a what-if sweep is keyed by its sweep id",
}


def test_keys_are_lowercase_dashes_and_carry_the_campaign():
    assert artifact_key("demo", "gates") == "gates-demo"
    assert artifact_key("Demo_Gates v2", "gates-detail") == "gates-detail-demo-gates-v2"
    key = artifact_key("x" * 300, "data-quality")
    assert len(key) <= 100 and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", key)
    assert slug("--") == "campaign" and campaign_tag("Llama3 405B") == "campaign:llama3-405b"


def test_every_campaign_artifact_key_goes_through_artifact_key():
    """A literal key (`key="gates"`) mixes campaigns in the UI's latest artifact: tasks build keys with the helper."""
    literal = []
    for path in sorted((REPO / "tasks").glob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "").startswith("create_")):
                continue
            for kw in node.keywords:
                if kw.arg == "key" and isinstance(kw.value, ast.Constant) and rel not in NOT_PER_CAMPAIGN:
                    literal.append(f"{rel}:{node.lineno} key={kw.value.value!r}")
    assert literal == [], literal
