"""Failure profiles from a team's own incident log: the log's format and checks (log.py), the fit (fit.py), the
profile a config names (profile.py) and a synthetic log from a known profile (synthetic.py). docs/failures.md."""

from campaign.failures.fit import (
    CategoryFit,
    FailureFit,
    LemonNode,
    MttfPoint,
    find_lemon_nodes,
    fit_failures,
    poisson_rate_interval,
    predict_job_mttf,
)
from campaign.failures.log import IncidentLog, category_key, read_incident_log
from campaign.failures.profile import fit_incident_log, profile_yaml, read_base_profile
from campaign.failures.synthetic import SyntheticCategory, SyntheticLog, synthetic_log

__all__ = [
    "CategoryFit",
    "FailureFit",
    "IncidentLog",
    "LemonNode",
    "MttfPoint",
    "SyntheticCategory",
    "SyntheticLog",
    "category_key",
    "find_lemon_nodes",
    "fit_failures",
    "fit_incident_log",
    "poisson_rate_interval",
    "predict_job_mttf",
    "profile_yaml",
    "read_base_profile",
    "read_incident_log",
    "synthetic_log",
]
