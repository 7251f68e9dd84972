"""The failure fit as a task: fit the incident log, write the profile atomically, publish it, log one line."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from campaign.failures import fit_incident_log
from campaign.failures.profile import profile_to_write
from campaign.failures.report import fit_report_markdown
from campaign.files import check_outputs, write_output
from tasks.artifacts import artifact_key


@task(name="fit-failures", task_run_name="fit-failures-{cluster}", cache_policy=None)
def fit_failure_profile(
    jobs: str,
    incidents: str,
    cluster: str,
    out: str | None = None,
    base: str | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
) -> dict:
    check_outputs({"out": out}, {"jobs": jobs, "incidents": incidents, "base": base})
    fit, profile = fit_incident_log(jobs, incidents, base=base, gpus_per_node=gpus_per_node, nodes=nodes)
    out_path = str(write_output(out, profile_to_write(fit, profile))) if out else None
    result = fit.to_json()
    create_table_artifact(
        key=artifact_key(cluster, "failure-rates"),
        table=[
            {
                "category": c.name,
                "scope": c.scope,
                "count": c.count,
                "rate": c.rate,
                "ci95_low": c.ci95[0],
                "ci95_high": c.ci95[1],
                "unit": c.unit,
            }
            for c in fit.categories
        ],
        description=f"failure rates fitted from {Path(incidents).name}",
    )
    create_markdown_artifact(
        key=artifact_key(cluster, "failure-profile"),
        markdown=fit_report_markdown(
            fit, f"Failure profile of {cluster}, fitted from {Path(incidents).name}"
        ),
        description="rates with intervals, job MTTF by size, lemon nodes",
    )
    get_run_logger().info(
        "failures fit: %d incidents, %d categories, %d lemon nodes; profile %s",
        fit.incidents,
        len(fit.categories),
        len(fit.lemon_nodes),
        out_path or "not written",
    )
    return {"profile": out_path, "fit": result}
