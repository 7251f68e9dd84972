"""The campaign config's schema: frozen pydantic models with their defaults, ranges and cross-field rules, one
module per config section.

Defaults live here, once. Figures from publications carry a `source` beside them. A validator's message that
starts with "@dotted.path: " names the key to blame; the loader turns it into `file:line: field.path: message`.
Also here: the digests of a validated config (`config_digest`, `DataConfig.production_digest`), since they are
functions of the models alone, not of the files they were read from.
"""

from campaign.config.schema.base import (
    MAX_EXPECTED_FAILURES,
    MAX_POWER_SAMPLES,
    MAX_SEED,
    MAX_WINDOW_CHECKPOINTS,
    MAX_WINDOW_DAYS,
    SOURCE_FIELD,
    WINDOW_YEARS,
    WORKSPACE_PLACEHOLDER,
    Frozen,
    Source,
)
from campaign.config.schema.campaign import CampaignConfig, config_digest
from campaign.config.schema.cluster import (
    HOURS_PER_YEAR,
    AcceleratorConfig,
    ClusterConfig,
    CostConfig,
    FailureCategoryConfig,
    KernelCalibrationConfig,
    LemonNodesConfig,
    NetworkConfig,
    ObservedRateConfig,
    PlannedMaintenanceConfig,
    PowerConfig,
    QuarantineConfig,
)
from campaign.config.schema.data import (
    TOKENIZER_SPECS,
    BenchmarkFileConfig,
    C4Config,
    CleaningConfig,
    DataConfig,
    DecontaminateConfig,
    FineWebConfig,
    GopherRepetitionConfig,
    LanguagesConfig,
    NearDedupConfig,
    PiiConfig,
    SourceConfig,
    UrlFilterConfig,
)
from campaign.config.schema.execute import INJECT_KINDS, ExecuteConfig, InjectConfig
from campaign.config.schema.gates import (
    CommitConfig,
    ConfigGateConfig,
    DataGateConfig,
    GatesConfig,
    RuntimeConfig,
    SimConfig,
)
from campaign.config.schema.model import ModelConfig
from campaign.config.schema.plan import (
    STACK_PRESETS,
    CheckpointConfig,
    LayoutConfig,
    MeasuredRunConfig,
    MemoryOverheadsConfig,
    OverlapConfig,
    PlanConfig,
    PowerSmoothingConfig,
    StackConfig,
)
from campaign.config.schema.rehearsal import RehearsalConfig, RehearsalModelConfig
from campaign.config.schema.window import AUTO, Auto, WindowConfig

__all__ = [
    "AUTO",
    "HOURS_PER_YEAR",
    "INJECT_KINDS",
    "MAX_EXPECTED_FAILURES",
    "MAX_POWER_SAMPLES",
    "MAX_SEED",
    "MAX_WINDOW_CHECKPOINTS",
    "MAX_WINDOW_DAYS",
    "SOURCE_FIELD",
    "STACK_PRESETS",
    "TOKENIZER_SPECS",
    "WINDOW_YEARS",
    "WORKSPACE_PLACEHOLDER",
    "AcceleratorConfig",
    "Auto",
    "BenchmarkFileConfig",
    "C4Config",
    "CampaignConfig",
    "CheckpointConfig",
    "CleaningConfig",
    "ClusterConfig",
    "CommitConfig",
    "ConfigGateConfig",
    "CostConfig",
    "DataConfig",
    "DataGateConfig",
    "DecontaminateConfig",
    "ExecuteConfig",
    "FailureCategoryConfig",
    "FineWebConfig",
    "Frozen",
    "GatesConfig",
    "GopherRepetitionConfig",
    "InjectConfig",
    "KernelCalibrationConfig",
    "LanguagesConfig",
    "LayoutConfig",
    "LemonNodesConfig",
    "MeasuredRunConfig",
    "MemoryOverheadsConfig",
    "ModelConfig",
    "NearDedupConfig",
    "NetworkConfig",
    "ObservedRateConfig",
    "OverlapConfig",
    "PiiConfig",
    "PlanConfig",
    "PlannedMaintenanceConfig",
    "PowerConfig",
    "PowerSmoothingConfig",
    "QuarantineConfig",
    "RehearsalConfig",
    "RehearsalModelConfig",
    "RuntimeConfig",
    "SimConfig",
    "Source",
    "SourceConfig",
    "StackConfig",
    "UrlFilterConfig",
    "WindowConfig",
    "config_digest",
]
