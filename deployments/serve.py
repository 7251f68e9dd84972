"""Serve every stage as a deployment from one process (no work pool): `make serve` beside `make server`."""

from prefect import serve
from prefect.schedules import Cron

from flows.analyse import analyse_flow
from flows.calendar import calendar_report_flow
from flows.commit import commit
from flows.execute import execute
from flows.lifecycle import campaign
from flows.prepare import prepare
from flows.simulate import simulate_flow
from flows.validate import validate


def main() -> None:
    serve(
        campaign.to_deployment(name="campaign-demo"),
        prepare.to_deployment(name="prepare-nightly", schedule=Cron("0 2 * * *", timezone="UTC")),
        validate.to_deployment(name="validate"),
        commit.to_deployment(name="commit"),
        execute.to_deployment(name="execute-window", concurrency_limit=1),
        analyse_flow.to_deployment(name="analyse"),
        simulate_flow.to_deployment(name="simulate"),
        calendar_report_flow.to_deployment(name="calendar-report", schedule=Cron("0 6 * * *", timezone="UTC")),
        limit=4,
        pause_on_shutdown=False,
    )


if __name__ == "__main__":
    main()
