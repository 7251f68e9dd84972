"""The committed config as the catalog recorded it (`commitments.config_json`), read once into the few figures the
analysis uses. A record may be partial (written by a test, or before a field existed): each figure is None or
empty where it is missing, and `cluster` is the validated cluster only when the whole config validates."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from campaign.config import ClusterConfig


@dataclass(frozen=True, slots=True)
class RecordedFailureRate:
    """One failure category's rate, in the unit the config gave it (the others None)."""

    name: str
    per_gpu_year: float | None
    per_job_hour: float | None
    per_1k_node_days: float | None


@dataclass(frozen=True, slots=True)
class RecordedConfig:
    gpus_per_node: int | None
    nodes: int | None
    failure_rates: tuple[RecordedFailureRate, ...]
    failure_categories: tuple[Mapping[str, object], ...]  # as recorded, for FailureCategoryConfig to validate
    power_smoothing: Mapping[str, object] | None  # plan.power_smoothing as recorded (None: off)
    source_weights: dict[str, float]  # data source -> its configured weight
    tokenizer: str | None
    cluster: ClusterConfig | None  # None: the record is not a whole config

    @classmethod
    def from_json(cls, text: str | None) -> RecordedConfig | None:
        """The `config_json` column: None when no config was recorded."""
        return cls.from_mapping(json.loads(text)) if text else None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RecordedConfig:
        """A config as parsed JSON (or `CampaignConfig.model_dump(mode="json")`)."""
        import pydantic

        from campaign.config import CampaignConfig

        cluster_json = data.get("cluster", {})
        failures = tuple(cluster_json.get("failures", []))
        try:
            cluster = CampaignConfig.model_validate(data).cluster
        except pydantic.ValidationError:  # a partial record (not one commit wrote)
            cluster = None
        return cls(
            gpus_per_node=cluster_json.get("gpus_per_node"),
            nodes=cluster_json.get("nodes"),
            failure_rates=tuple(
                RecordedFailureRate(
                    f["name"], f.get("per_gpu_year"), f.get("per_job_hour"), f.get("per_1k_node_days")
                )
                for f in failures
            ),
            failure_categories=failures,
            power_smoothing=data.get("plan", {}).get("power_smoothing"),
            source_weights={
                s["name"]: float(s.get("weight", 0.0)) for s in data.get("data", {}).get("sources", [])
            },
            tokenizer=data.get("data", {}).get("tokenizer"),
            cluster=cluster,
        )
