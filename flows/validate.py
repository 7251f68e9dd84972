"""The validate stage: every gate, recorded against this config digest and this data digest."""

import sys

from prefect import flow

from campaign.errors import CampaignError, GateFailed
from flows.common import StageParams, failed, quiet_expected_errors, stage_run
from tasks.config import load_campaign
from tasks.rehearsal import rehearsal_gate
from tasks.validate import (
    configuration_gates,
    data_identity_gate,
    data_quality_gate,
    load_evidence,
    record_gates,
    volume_gates,
)


@flow(name="validate")
def validate(params: StageParams = StageParams()):
    quiet_expected_errors()
    try:
        loaded, ws = load_campaign(params.config, params.overrides, params.workspace)
        with stage_run(ws, "validate", loaded.digest) as run_id:
            # Every gate judges the same bytes: read once here, and recorded against their digest.
            evidence = load_evidence(loaded.config, ws)
            results = [data_identity_gate(evidence), data_quality_gate(loaded.config, ws, evidence),
                       *volume_gates(loaded.config, evidence)]
            plan_results, _ = configuration_gates(loaded.config)
            results += plan_results
            results.append(rehearsal_gate(loaded.config, ws, evidence))
            record_gates(ws, run_id, loaded.digest, evidence.digest, results)
            failing = [r for r in results if not r.passed]
            if failing:
                err = GateFailed(
                    "gates failed:\n  - " + "\n  - ".join(f"{r.gate}: {r.summary}" for r in failing),
                    where=str(ws.root), fix="fix the data or the config, then run `campaign validate` again",
                )
                err.results = results  # the CLI prints the whole table
                raise err
            return results
    except CampaignError as err:
        return failed(err)


if __name__ == "__main__":
    from flows.terminal import stage_main

    sys.exit(stage_main("validate"))
