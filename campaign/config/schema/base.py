"""The schema's base model (frozen, no extra keys, no NaN) and the ranges every section can represent."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

Source = str | None

# Ranges the models, the simulator, the catalog and the calendar can represent.
MAX_SEED = 2**53 - 1  # exact in JSON numbers (the Prefect UI form) and in a DuckDB BIGINT
MAX_WINDOW_DAYS = 366.0  # a window is at most a year
WINDOW_YEARS = (2000, 2100)  # timestamps the calendar and the simulator's clock handle
MAX_EXPECTED_FAILURES = 1_000_000  # failures the simulator may expect in one window
MAX_WINDOW_CHECKPOINTS = 10_000_000
MAX_POWER_SAMPLES = 20_000_000  # stored power samples per replica (about 160 MB as float64)
WORKSPACE_PLACEHOLDER = "{workspace}"  # a data path starting with it lives in the campaign's workspace
SOURCE_FIELD = Field(None, description="Where a published figure comes from (paper, section, table).")


class Frozen(BaseModel):
    # allow_inf_nan=False: NaN and infinity are never a valid figure; every number also has a finite range.
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)
