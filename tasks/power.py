"""The facility power notice: compute it, write <stem>-power.md and .json atomically, publish it, log one line."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from campaign.files import atomic_write_json, atomic_write_text
from campaign.sim import SimInputs
from campaign.sim.power_notice import notice_markdown, power_notice
from tasks.artifacts import power_notice_key


@task(name="power-notice", task_run_name="power-notice-{stem}", cache_policy=None)
def write_power_notice(out_dir: Path, stem: str, inputs: SimInputs, replicas: int, title: str) -> dict:
    notice = power_notice(inputs, replicas)
    markdown = notice_markdown(notice, title)
    json_path = atomic_write_json(out_dir / f"{stem}-power.json", notice)
    md_path = atomic_write_text(out_dir / f"{stem}-power.md", markdown)
    create_markdown_artifact(
        key=power_notice_key(stem),
        markdown=markdown,
        description=f"facility power notice: {title}",
    )
    bare = notice["without_smoothing"]
    get_run_logger().info(
        "power notice %s: largest swing %.2f MW, steepest ramp %.2f MW/s; %s",
        stem,
        bare["largest_swing_mw"],
        bare["steepest_ramp_mw_per_s"],
        md_path,
    )
    return {"markdown": str(md_path), "json": str(json_path), "notice": notice}
