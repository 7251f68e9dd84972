"""Run an expectation suite over a pandas DataFrame with Great Expectations 1.x (an ephemeral context).

GX has no working DuckDB datasource (GX issue #10738), so the data is read with DuckDB into pandas first.
GX is imported lazily: its import costs seconds.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from data_checks.suites import Spec

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
log = logging.getLogger(__name__)


def validate_frame(
    frame: pd.DataFrame, specs: list[Spec], suite_name: str = "clean_data", docs_dir: Path | None = None
) -> dict[str, Any]:
    """Validate `frame` against `specs` in one call; returns a JSON-ready summary with one row per expectation.

    With `docs_dir`, the run goes through a GX Checkpoint whose UpdateDataDocsAction builds Great Expectations'
    Data Docs (a static HTML site, `index.html`) into that folder; `docs_index` in the summary names it."""
    # GX 1.x imports modules Python 3.11 deprecates, and logs its temporary docs folder at INFO: noise to users.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"great_expectations(\..*)?")
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    for name in [n for n in logging.root.manager.loggerDict if n.startswith("great_expectations")]:
        logging.getLogger(name).setLevel(logging.WARNING)

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch_definition = (
        context.data_sources.add_pandas("campaign")
        .add_dataframe_asset(suite_name)
        .add_batch_definition_whole_dataframe("whole")
    )
    suite = gx.ExpectationSuite(name=suite_name)
    for spec in specs:
        cls = _expectation_class(gxe, spec["type"])
        suite.add_expectation(cls(**spec["kwargs"]))
    suite = context.suites.add(suite)
    docs_index = None
    if docs_dir is None:
        batch = batch_definition.get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(suite, result_format="SUMMARY")
    else:
        result = _validate_with_docs(gx, context, batch_definition, suite, frame, Path(docs_dir))
        docs_index = str(Path(docs_dir) / "index.html")
    rows = []
    for r in result.results:
        config = r.expectation_config
        assert config is not None  # a validation result always names the expectation it ran
        res = r.result or {}
        rows.append(
            {
                "expectation": config.type,
                "column": config.kwargs.get("column", ""),
                "bounds": bounds_text(config.kwargs),
                "success": bool(r.success),
                "unexpected_count": int(res.get("unexpected_count") or 0),
                "observed_value": _jsonable(res.get("observed_value")),
                "partial_unexpected": [_jsonable(v) for v in (res.get("partial_unexpected_list") or [])[:5]],
            }
        )
    return {
        "success": bool(result.success),
        "n_rows": len(frame),
        "expectations": rows,
        "great_expectations_version": gx.__version__,
        "docs_index": docs_index,
    }


def _validate_with_docs(
    gx: Any, context: Any, batch_definition: Any, suite: Any, frame: pd.DataFrame, docs_dir: Path
) -> Any:
    """Validate through a Checkpoint that renders the result into a Data Docs site under `docs_dir`."""
    from great_expectations.checkpoint import UpdateDataDocsAction

    docs_dir.mkdir(parents=True, exist_ok=True)
    context.add_data_docs_site(
        "campaign",
        {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=suite.name, data=batch_definition, suite=suite)
    )
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(
            name=f"{suite.name}_checkpoint",
            validation_definitions=[definition],
            result_format="SUMMARY",
            actions=[UpdateDataDocsAction(name="data_docs", site_names=["campaign"])],
        )
    )
    run = checkpoint.run(batch_parameters={"dataframe": frame})
    (result,) = run.run_results.values()
    return result


def bounds_text(kwargs: dict[str, Any]) -> str:
    """An expectation's bounds as a person reads them: `1 .. 5,000`, `>= 30`, `in {web, docs}`, or empty."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if "value_set" in kwargs:
        return "in {" + ", ".join(str(v) for v in kwargs["value_set"]) + "}"
    if low is not None and high is not None:
        return f"{low:,} .. {high:,}"
    if low is not None:
        return f">= {low:,}"
    if high is not None:
        return f"<= {high:,}"
    return ""


def _expectation_class(module: Any, type_name: str) -> Any:
    name = "".join(part.capitalize() for part in type_name.split("_"))
    return getattr(module, name)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return value.item()
    except AttributeError:
        return str(value)


def summarise(result: dict[str, Any]) -> str:
    """One line for the gate table: all passed, or each failed expectation with what it saw."""
    failed = [r for r in result["expectations"] if not r["success"]]
    if not failed:
        return f"{len(result['expectations'])} expectations on {result['n_rows']:,} rows: all passed"
    return "failed: " + "; ".join(_describe(r) for r in failed)


def observed_text(row: dict[str, Any]) -> str:
    """What GX saw for one expectation: its observed value, or how many values fell outside and a few of them."""
    if row["unexpected_count"]:
        return f"{row['unexpected_count']:,} unexpected, e.g. {', '.join(map(str, row['partial_unexpected'][:3]))}"
    if row["observed_value"] is not None:
        value = row["observed_value"]
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
    return "0 unexpected"


def _describe(row: dict[str, Any]) -> str:
    what = f"{row['expectation']}({row['column']})" if row["column"] else row["expectation"]
    if row["unexpected_count"]:
        return f"{what}: {row['unexpected_count']} unexpected, e.g. {row['partial_unexpected'][:3]}"
    return f"{what}: observed {row['observed_value']}"
