"""The lifecycle's own summary: each stage's outcome, the window's headline figures and the report, as one
markdown artifact on the parent run (`campaign-summary-<campaign>`)."""

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from campaign.figures import tokens_b
from tasks.artifacts import artifact_key


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


@task(name="lifecycle-summary", cache_policy=None)
def publish_lifecycle_summary(campaign: str, stages: list[tuple[str, str, str]], result: dict | None) -> str:
    """`stages`: (stage, state name, state message) in the order they ran; `result`: analyse's, when it ran."""
    failed = next((s for s in stages if s[1] != "Completed"), None)
    verdict = f"stopped at **{failed[0]}**" if failed else "done"
    lines = [
        f"# Campaign `{campaign}`: {verdict}",
        "",
        "| stage | outcome | message |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| {stage} | {'ok' if name == 'Completed' else '**' + name + '**'} | {_cell(message or '')} |"
        for stage, name, message in stages
    ]
    if result:
        lines += [
            "",
            f"* ETTR {result['ettr']:.3f}, window utilisation {result.get('window_utilisation', 0):.3f}",
            (
                f"* {tokens_b(result['tokens_trained'])} of {tokens_b(result['tokens_target'])} tokens trained; "
                f"{result['interruptions']['unexpected']} unexpected interruptions"
            ),
            f"* lost to failures ${result['cost_usd']['lost']:,.0f}",
            f"* report: `{Path(result['report_html']).resolve()}` (on the machine that ran this flow run)",
        ]
    markdown = "\n".join(lines) + "\n"
    create_markdown_artifact(
        key=artifact_key(campaign, "campaign-summary"),
        markdown=markdown,
        description=f"lifecycle of {campaign}: {verdict.replace('*', '')}",
    )
    get_run_logger().info("lifecycle of %s: %s", campaign, verdict.replace("*", ""))
    return markdown
