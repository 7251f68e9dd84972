"""The validate stage: every gate, recorded against this config digest and this data digest.

A gate whose result was recorded for exactly these digests under this code version is reused, not run again
(campaign/reuse.py); `rerun` names gates to run whatever was recorded. Every gate is recorded in this run either
way, a reused one naming the run that judged it."""

import sys

from prefect import flow

from campaign.errors import GateFailed
from flows.common import StageParams, campaign_tags, fails_cleanly, stage_run, stage_run_name
from tasks.config import load_campaign
from tasks.rehearsal import rehearsal_gate
from tasks.validate import (
    configuration_gates,
    data_identity_gate,
    data_quality_gate,
    judge_gate,
    load_evidence,
    plan_of,
    record_gates,
    reused_gates,
    stamped,
    volume_gates,
)


@flow(name="validate", flow_run_name=stage_run_name("validate"))
@fails_cleanly
def validate_flow(params: StageParams = StageParams(), rerun: list[str] | None = None):
    """`rerun`: gates to run even when their recorded result could be reused (every gate reads its evidence)."""
    loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
    with stage_run(ws, "validate", loaded.digest) as run_id, campaign_tags(loaded.config.name):
        # Every gate judges the same bytes: read once here, and recorded against their digest.
        evidence = load_evidence(loaded.config, ws)
        results = [data_identity_gate(evidence)]
        reused = reused_gates(ws, loaded.digest, evidence, list(rerun or []))

        def kept(*gates: str) -> list | None:
            return [reused[g] for g in gates] if all(g in reused for g in gates) else None

        results += kept("data_quality") or [data_quality_gate(loaded.config, ws, evidence)]
        results += kept("data_volume", "data_mixture") or volume_gates(loaded.config, evidence)
        plan_results = kept("layout", "memory", "schedule")
        if plan_results is None:
            plan_results, plan = configuration_gates(loaded.config)
        else:
            plan = plan_of(loaded.config)
        results += plan_results
        results += kept("rehearsal") or [rehearsal_gate(loaded.config, ws, evidence)]
        results = stamped(results)
        rows = record_gates(ws, run_id, loaded.config, loaded.digest, evidence.digest, results, plan)
        # One run per gate: a failed gate is red in the graph, with its figure and threshold.
        for row in rows:
            judge_gate(row, return_state=True)
        failing = [row for row in rows if not row.passed]
        if failing:
            raise GateFailed(
                f"{len(failing)} of {len(rows)} gates failed: "
                + "; ".join(f"{row.gate}: {row.figure} (threshold: {row.threshold})" for row in failing)
                + "\n  - "
                + "\n  - ".join(f"{row.gate}: {row.summary}" for row in failing),
                where=str(ws.root),
                fix="fix the data or the config, then run `campaign validate` again",
                results=results,  # the CLI prints the whole table
            )
        return results


if __name__ == "__main__":
    from campaign_cli.terminal import stage_main

    sys.exit(stage_main("validate"))
