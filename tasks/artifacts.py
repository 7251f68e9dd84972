"""Prefect names that carry the campaign: artifact keys, run names and tags, one rule for every task and flow.

Prefect artifact keys may hold only lowercase letters, digits and dashes; the campaign's name goes last
(`gates-demo`), so the UI's artifact list keeps one series per campaign and the latest of a key never mixes two
campaigns or workspaces.
"""

import json
import re
from pathlib import Path

MAX_KEY = 100  # characters; Prefect does not document a limit, the UI truncates long keys


def slug(name: str) -> str:
    """`Demo_Gates v2` -> `demo-gates-v2`: lowercase letters, digits and single dashes."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "campaign"


def artifact_key(campaign: str, what: str) -> str:
    """The artifact key of `what` (e.g. `gates`) for this campaign: `gates-demo`."""
    return f"{slug(what)}-{slug(campaign)}"[:MAX_KEY].rstrip("-")


def approval_key(campaign: str) -> str:
    """The approval request of this campaign's commit: `approval-demo`."""
    return artifact_key(campaign, "approval")


def calendar_key(cluster: str, part: str = "") -> str:
    """A calendar belongs to a cluster, shared by its campaigns: keyed by the cluster, then the part
    (`cluster-calendar-demo-h100-16`, `cluster-calendar-demo-h100-16-gaps`)."""
    key = artifact_key(cluster, "cluster-calendar")
    return f"{key}-{slug(part)}" if part else key


def power_notice_key(stem: str) -> str:
    """A power notice is keyed by what it is for (the config digest or the commitment): `power-notice-<stem>`."""
    return artifact_key(stem, "power-notice")


def sweep_key(sweep_id: str) -> str:
    """A what-if sweep is keyed by its id (the first 12 characters): `sweep-<id>`."""
    return artifact_key(sweep_id[:12], "sweep")


# A comparison sets several campaigns side by side: one key for all.
COMPARE_KEY = "campaign-compare"
COMPARE_HTML_KEY = "campaign-compare-html"


def local_file_markdown(label: str, path: Path) -> str:
    """A file written by a flow, named plainly for an artifact: its path on the machine that ran the flow. A
    `file://` link would open nothing from the Prefect UI (browsers refuse file links from web pages, and the UI
    may be on another machine)."""
    return (
        f"**{label}**: `{Path(path).resolve()}`\n\nA file on the machine that ran this flow run: open it in a "
        "browser there (it is one self-contained page), or copy it."
    )


def campaign_tag(campaign: str) -> str:
    """The tag every run of this campaign carries (`campaign:demo`), to filter the UI's runs by campaign."""
    return f"campaign:{slug(campaign)}"


def workspace_campaign(root: Path) -> str:
    """The campaign a workspace belongs to (its `.campaign-workspace` marker), else the folder's name."""
    try:
        return str(json.loads((Path(root) / ".campaign-workspace").read_text(encoding="utf-8"))["campaign"])
    except (OSError, ValueError, KeyError, TypeError):
        return Path(root).name
