"""Failure rates fitted from an incident log: each category's scope, rate and 95% interval, whether its failures
cluster, the lemon nodes, and the job MTTF they predict at other job sizes.

- Scope by likelihood: a category's failures in each job segment are Poisson with mean rate x GPUs x hours (the
  rate grows with the job) or rate x hours (per job-hour, whatever its size); the model with the higher
  likelihood across jobs of different sizes wins, and the log-likelihood ratio is its evidence. With one job size
  the two cannot be told apart and the rate grows with the job, as a per-node rate always has.
- Rate intervals: exact (Garwood) Poisson intervals from chi-square quantiles; posterior draws (MTTF intervals,
  the simulator) use the Jeffreys posterior Gamma(n + 1/2, exposure).
- Clustering: arrival times on the category's own exposure clock (GPU-hours or job-hours summed over the jobs
  running at once) have exponential gaps if failures are Poisson; a Weibull fitted to the gaps with shape below 1
  and a likelihood-ratio test against the exponential says they come in bursts.
- Lemon nodes: a node's failures against the others' mean (every node equally exposed), a one-sided Poisson
  p-value, Bonferroni-corrected for the number of nodes.
Sources: Kokolis et al., "Revisiting Reliability in Large-Scale Machine Learning Research Clusters" (arXiv
2410.21680) for job-scope failures and lemon nodes; Garwood (Biometrika 28, 1936) for the exact interval; the
reasoning and the formulas in docs/failures.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special, stats

from campaign.errors import DataError
from campaign.failures.log import IncidentLog, category_key
from campaign.records import JsonRecord

HOURS_PER_YEAR = 365.0 * 24.0
DEFAULT_SIZES = (1024, 2048, 4096, 8192, 16384)
JEFFREYS_SHAPE = 0.5
MTTF_DRAWS = 4000  # posterior draws behind each MTTF interval (seeded: the same log gives the same interval)
CLUSTER_P = 0.01  # a Weibull fit better than the exponential at this level says the arrivals are not Poisson
MIN_GAPS = 5

# Unit of a fitted rate per scope, as the config names it (campaign.config.FailureCategoryConfig).
UNITS = {"gpu": "per_gpu_year", "node": "per_1k_node_days", "job": "per_job_hour"}


@dataclass(frozen=True, slots=True)
class ScopeEvidence(JsonRecord):
    """How a category's rate scales, judged from the log: both log-likelihoods, their ratio and what it says."""

    loglik_per_gpu: float
    loglik_per_job_hour: float
    log_likelihood_ratio: float
    job_sizes: int  # distinct job sizes in the log: with one, the scope cannot be judged
    verdict: str


@dataclass(frozen=True, slots=True)
class Interarrival(JsonRecord):
    """The Weibull shape of the gaps between failures on their exposure clock, its p-value against the
    exponential (None: too few gaps to fit), and a verdict in words."""

    weibull_shape: float | None
    p_value: float | None
    verdict: str


@dataclass(frozen=True, slots=True)
class CategoryFit(JsonRecord):
    name: str
    scope: str  # gpu, node (the rate grows with the job's GPUs or nodes) or job (per job-hour)
    count: int
    rate: float  # in `unit`
    unit: str  # per_gpu_year, per_1k_node_days or per_job_hour
    ci95: tuple[float, float]
    exposure_h: float  # GPU-, node- or job-hours the count was seen over (the rate's own hours)
    evidence: ScopeEvidence
    interarrival: Interarrival


@dataclass(frozen=True, slots=True)
class FittedRate(JsonRecord):
    """A config category's rate as it was fitted (its `observed` failures and exposure), with its exact 95%
    interval in its config unit: the fit's figures for a category, as the window report shows them."""

    name: str
    scope: str
    count: int
    exposure_h: float
    rate: float  # in `unit`
    ci95: tuple[float, float]
    unit: str


@dataclass(frozen=True, slots=True)
class LemonNode(JsonRecord):
    node: str
    failures: int
    expected: float
    p_value: float  # Bonferroni-corrected for the number of nodes


@dataclass(frozen=True, slots=True)
class MttfPoint(JsonRecord):
    gpus: int
    mttf_h: float
    ci95: tuple[float, float]


@dataclass(frozen=True, slots=True)
class ObservedMttf(JsonRecord):
    gpus: int
    job_hours: float
    failures: int
    mttf_h: float | None
    ci95: tuple[float, float | None]


@dataclass(frozen=True, slots=True)
class Exposure(JsonRecord):
    """What the log's jobs ran: GPU-hours, job-hours and node-days."""

    gpu_hours: float
    job_hours: float
    node_days: float


@dataclass(frozen=True, slots=True)
class ClusterLemons(JsonRecord):
    """The lemons found as the simulator's `cluster.lemons` (`cluster_lemons`)."""

    count: int
    fraction: float  # of the nodes
    factor: float  # their failures over what the other nodes' mean gives them
    healthy_divisor: float  # a fitted gpu- or node-scope rate over this is the healthy nodes' rate


@dataclass(frozen=True, slots=True)
class FailureFit(JsonRecord):
    """Everything fitted from one incident log; `to_json()` is `campaign failures fit --json`."""

    exposure: Exposure
    categories: list[CategoryFit]
    lemon_nodes: list[LemonNode]
    job_mttf_h: list[MttfPoint]
    observed_mttf_h: list[ObservedMttf]
    mttf_curve_h: list[
        MttfPoint
    ]  # the prediction from the smallest to the largest size, logged or asked, for plots
    gpus_per_node: int
    nodes: int  # nodes the lemon test spread node failures over
    jobs: int
    segments: int
    incidents: int
    notes: list[str] = field(default_factory=list)
    # The lemons found as the simulator's cluster.lemons, with the divisor to the healthy rates (cluster_lemons).
    cluster_lemons: ClusterLemons | None = None


def poisson_rate_interval(count: int, exposure: float, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate: count events over `exposure`."""
    alpha = 1.0 - level
    lo = stats.chi2.ppf(alpha / 2, 2 * count) / 2 if count > 0 else 0.0
    hi = stats.chi2.ppf(1 - alpha / 2, 2 * count + 2) / 2
    return float(lo) / exposure, float(hi) / exposure


def _loglik(counts: np.ndarray, x: np.ndarray) -> float:
    """Poisson log-likelihood of per-segment counts with means proportional to x, at the rate's MLE."""
    total = counts.sum()
    if total == 0:
        return 0.0
    lam = total / x.sum()
    hit = counts > 0
    return float(
        (counts[hit] * np.log(lam * x[hit])).sum() - total - special.gammaln(counts[hit] + 1.0).sum()
    )


def _scope_evidence(
    counts: np.ndarray, gpus: np.ndarray, hours: np.ndarray, default: str
) -> tuple[str, ScopeEvidence]:
    """'grows', 'job', or `default` when the log cannot tell, and the evidence: both log-likelihoods, their
    ratio and what it says."""
    ll_grows = _loglik(counts, gpus * hours)
    ll_job = _loglik(counts, hours)
    ratio = ll_grows - ll_job
    sizes = np.unique(gpus)
    assumed = (
        "taken per job-hour, as the base profile states it"
        if default == "job"
        else "taken to grow with the job"
    )
    if counts.sum() == 0:
        verdict, words = default, f"no failures: the scope cannot be judged; {assumed}"
    elif sizes.size < 2:
        verdict = default
        words = (
            f"every job had {int(sizes[0]):,} GPUs: per-GPU and per-job rates predict the same, so the scope "
            f"cannot be judged; {assumed}"
        )
    else:
        verdict = "grows" if ratio > 0 else "job"
        strength = "weak" if abs(ratio) < 1 else "moderate" if abs(ratio) < 3 else "strong"
        better = "growing with the job's GPUs" if ratio > 0 else "per job-hour"
        words = (
            f"{strength} evidence for a rate {better}: log-likelihood ratio {abs(ratio):.1f} across "
            f"{sizes.size} job sizes"
        )
    return verdict, ScopeEvidence(ll_grows, ll_job, ratio, int(sizes.size), words)


def exposure_clock(jobs: pd.DataFrame, load: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints (h) and the cumulative exposure at each: the integral over time of the summed `load` of the
    segments running (GPUs for a rate that grows with the job, 1 for a per-job-hour rate)."""
    t = np.concatenate([jobs["start_h"].to_numpy(), jobs["end_h"].to_numpy()])
    d = np.concatenate([load, -load])
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    running = np.cumsum(d)
    cumulative = np.concatenate([[0.0], np.cumsum(running[:-1] * np.diff(t))])
    return t, cumulative


def _interarrival(clock: tuple[np.ndarray, np.ndarray], times_h: np.ndarray) -> Interarrival:
    """Weibull against exponential for the gaps between arrivals on the exposure clock."""
    on_clock = np.sort(np.interp(times_h, clock[0], clock[1]))
    gaps = np.diff(on_clock)
    if gaps.size < MIN_GAPS:
        return Interarrival(None, None, f"too few failures ({times_h.size}) to judge how they arrive")
    mean = gaps.mean()
    if mean <= 0:
        return Interarrival(None, 0.0, "all at the same moment: one event logged many times, or a burst")
    # Simultaneous failures (one event in several jobs) would make log(0): floor them at a millionth of the mean.
    x = np.maximum(gaps / mean, 1e-6)
    shape, _, scale = stats.weibull_min.fit(x, floc=0)
    ll_weibull = float(stats.weibull_min.logpdf(x, shape, 0, scale).sum())
    ll_exp = float(stats.expon.logpdf(x, scale=x.mean()).sum())
    p = float(stats.chi2.sf(max(0.0, 2.0 * (ll_weibull - ll_exp)), 1))
    if p < CLUSTER_P and shape < 1:
        verdict = (
            f"clustered: gaps fit a Weibull of shape {shape:.2f} < 1 better than independent arrivals "
            f"(p {p:.2g}); failures come in bursts, so a Poisson rate understates the bad days"
        )
    elif p < CLUSTER_P:
        verdict = f"more regular than independent arrivals (Weibull shape {shape:.2f}, p {p:.2g})"
    else:
        verdict = f"consistent with independent (Poisson) arrivals (Weibull shape {shape:.2f}, p {p:.2g})"
    return Interarrival(float(shape), p, verdict)


def find_lemon_nodes(
    node_counts: Mapping[str, int], nodes: int, alpha: float = 0.05
) -> tuple[list[LemonNode], list[LemonNode]]:
    """(lemons, every named node tested): a node is a lemon when its failures are improbably many against the
    other nodes' mean (each node equally exposed), one-sided Poisson, Bonferroni-corrected over `nodes`."""
    total = sum(node_counts.values())
    tested = []
    for node, k in node_counts.items():
        expected = (total - k) / (nodes - 1) if nodes > 1 else float(k)
        p = float(stats.poisson.sf(k - 1, expected)) if expected > 0 else (0.0 if k > 0 else 1.0)
        tested.append(LemonNode(node, int(k), float(expected), min(1.0, p * nodes)))
    tested.sort(key=lambda n: (n.p_value, -n.failures, n.node))
    return [n for n in tested if n.p_value < alpha], tested


def cluster_lemons(lemons: Sequence[LemonNode], nodes: int) -> ClusterLemons | None:
    """The lemons found as the simulator's `cluster.lemons`: `count`, `fraction` of the nodes and `factor` (their
    failures over what the other nodes' mean gives them), and
    `healthy_divisor`, 1 + fraction x (factor - 1): a fitted gpu- or node-scope rate is the average over every
    node, lemons included, and divided by it gives the healthy nodes' rate the simulator takes with lemons
    (docs/failures.md). None without lemons."""
    expected = sum(n.expected for n in lemons)
    if not lemons or expected <= 0 or nodes <= 0:
        return None
    factor = max(1.0, sum(n.failures for n in lemons) / expected)
    fraction = len(lemons) / nodes
    return ClusterLemons(len(lemons), fraction, factor, 1.0 + fraction * (factor - 1.0))


def _posterior_draws(fits: Sequence[CategoryFit], draws: int) -> np.ndarray:
    """(categories, draws) rates per exposure hour from each category's Jeffreys posterior (seeded)."""
    rng = np.random.default_rng(0)
    return np.array(
        [rng.gamma(c.count + JEFFREYS_SHAPE, 1.0 / c.exposure_h, size=draws) for c in fits]
    ).reshape(len(fits), draws)


def _units_per_job(scope: str, gpus: int, gpus_per_node: int) -> float:
    return float(gpus) if scope == "gpu" else gpus / gpus_per_node if scope == "node" else 1.0


def predict_job_mttf(
    fits: Sequence[CategoryFit], sizes: Sequence[int], gpus_per_node: int, draws: int = MTTF_DRAWS
) -> list[MttfPoint]:
    """Mean hours between a job's failures at each size (every category's rate x its units), with the central
    95% of its posterior."""
    point = np.array([c.count / c.exposure_h for c in fits])
    posterior = _posterior_draws(fits, draws)
    out = []
    for g in sizes:
        units = np.array([_units_per_job(c.scope, g, gpus_per_node) for c in fits])
        rate = float(units @ point) if fits else 0.0
        sampled = units @ posterior if fits else np.zeros(draws)
        lo, hi = np.quantile(1.0 / sampled, [0.025, 0.975]) if fits else (math.inf, math.inf)
        out.append(MttfPoint(int(g), 1.0 / rate if rate > 0 else math.inf, (float(lo), float(hi))))
    return out


def observed_job_mttf(log: IncidentLog, max_sizes: int = 50) -> list[ObservedMttf]:
    """Per job size in the log: its job-hours over its failures, with the exact interval."""
    hours = log.jobs.groupby("gpus")["hours"].sum()
    if hours.size > max_sizes:
        return []
    failures = log.jobs["gpus"].to_numpy()[log.incidents["segment"].to_numpy()]
    counts = pd.Series(failures).value_counts()
    out = []
    for g, h in zip(hours.index.to_numpy(dtype=np.int64), hours.to_numpy(), strict=True):
        n = int(counts.get(g, 0))
        lo, hi = poisson_rate_interval(n, float(h))
        out.append(
            ObservedMttf(
                int(g), float(h), n, float(h) / n if n else None, (1.0 / hi, 1.0 / lo if lo > 0 else None)
            )
        )
    return out


def _curve_sizes(sizes: Sequence[int], points: int = 25) -> list[int]:
    """Job sizes spread evenly on a log scale over the range of `sizes`."""
    lo, hi = min(sizes), max(sizes)
    return sorted({int(g) for g in np.rint(np.geomspace(lo, hi, points))} | {lo, hi})


def fit_failures(
    log: IncidentLog,
    *,
    gpus_per_node: int = 8,
    nodes: int | None = None,
    base_scopes: Mapping[str, str] | None = None,
    aliases: Mapping[str, str] | None = None,
    scope_hints: Mapping[str, str] | None = None,
    sizes: Sequence[int] = DEFAULT_SIZES,
    alpha: float = 0.05,
) -> FailureFit:
    """Fit every category of the log (and each of `known_categories` it never saw, at zero failures).

    Args:
        gpus_per_node: GPUs per node, for node-days and per-node rates.
        nodes: nodes in the cluster, for the lemon test (default: the nodes the incidents name, which can only
            make the test more cautious).
        base_scopes: the config's categories, each with how its rate is stated (`gpu` per_gpu_year, `node`
            per_1k_node_days, `job` per_job_hour). A log category matching one by `category_key` takes its
            name, states a rate that grows with the job per node if the base does, and takes the base's scope
            where the log cannot tell; one matching none is kept under its own name. Each is listed, at zero
            failures when the log never saw it.
        aliases: other names of the base's categories (alias -> name), matched as names are.
        scope_hints: how a category the log may hold states its rate (a scheduler mapping's scopes), for the
            categories the base does not have; these are not listed when the log never saw them.
    """
    jobs, incidents = log.jobs, log.incidents
    gpus = jobs["gpus"].to_numpy().astype(float)
    hours = jobs["hours"].to_numpy()
    gpu_hours = float((gpus * hours).sum())
    job_hours = float(hours.sum())
    base_scopes = dict(base_scopes or {})
    hints = dict(scope_hints or {})
    names = {category_key(n): n for n in base_scopes}
    for alias, name in (aliases or {}).items():
        names.setdefault(category_key(alias), name)
    keys = incidents["category"].map(category_key)
    label = keys.map(lambda k: names.get(k, k))
    notes: list[str] = list(log.notes)
    renamed = sorted(
        {(str(c), str(n)) for c, n in zip(incidents["category"], label, strict=True) if category_key(c) != n}
    )
    if renamed:
        notes.append(
            "categories matched by name or alias: "
            + ", ".join(f"{c!r} as {n}" for c, n in renamed[:12])
            + (f" and {len(renamed) - 12} more" if len(renamed) > 12 else "")
        )
    unmatched = sorted(set(label) - set(base_scopes) - set(hints))
    if base_scopes and unmatched:
        notes.append(
            f"not in the base profile by name or alias: {', '.join(unmatched)}; each keeps its own name and a scope "
            "judged from the log alone (a rate growing with the job where the log cannot tell); add it, or an alias, "
            "to the profile to give it the profile's scope and times"
        )

    clocks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    fits = []
    seen = set(label.unique())
    all_names = sorted(seen) + sorted(set(names.values()) - seen)
    segment = incidents["segment"].to_numpy()
    for name in all_names:
        mask = (label == name).to_numpy()
        counts = np.bincount(segment[mask], minlength=len(jobs)).astype(float)
        stated = base_scopes.get(name) or hints.get(name) or "gpu"
        grows, evidence = _scope_evidence(counts, gpus, hours, "job" if stated == "job" else "grows")
        scope = "job" if grows == "job" else "node" if stated == "node" else "gpu"
        n = int(mask.sum())
        if scope == "gpu":
            exposure, per_unit_h = gpu_hours, HOURS_PER_YEAR
        elif scope == "node":
            exposure, per_unit_h = gpu_hours / gpus_per_node, 24.0 * 1000.0
        else:
            exposure, per_unit_h = job_hours, 1.0
        lo, hi = poisson_rate_interval(n, exposure)
        clock_key = "job" if scope == "job" else "gpu"
        if clock_key not in clocks:
            clocks[clock_key] = exposure_clock(jobs, np.ones(len(jobs)) if scope == "job" else gpus)
        fits.append(
            CategoryFit(
                name=name,
                scope=scope,
                count=n,
                rate=n / exposure * per_unit_h,
                unit=UNITS[scope],
                ci95=(lo * per_unit_h, hi * per_unit_h),
                exposure_h=exposure,
                evidence=evidence,
                interarrival=_interarrival(clocks[clock_key], incidents["time_h"].to_numpy()[mask]),
            )
        )
    fits.sort(key=lambda c: (-c.count, c.name))

    # Lemon nodes: node-named failures of the categories whose rate grows with the job (a job-scope failure is
    # not the node's fault even when the log names one).
    grows_names = {c.name for c in fits if c.scope != "job"}
    named = incidents[(incidents["node"] != "").to_numpy() & label.isin(grows_names).to_numpy()]
    node_counts = named["node"].value_counts()
    seen_nodes = int(incidents.loc[incidents["node"] != "", "node"].nunique())
    if nodes is None:
        nodes = seen_nodes
        if nodes:
            notes.append(
                f"lemon test over the {nodes} nodes the incidents name (pass --nodes with the cluster's node "
                "count to count the nodes that never failed)"
            )
    elif nodes < seen_nodes:
        raise DataError(
            f"the incidents name {seen_nodes} different nodes, more than the {nodes} nodes given",
            where=f"{log.incidents_path}: node",
            fix="pass the cluster's whole node count to --nodes",
        )
    lemons = (
        find_lemon_nodes({str(k): int(v) for k, v in node_counts.items()}, nodes, alpha)[0] if nodes else []
    )
    observed = observed_job_mttf(log)
    return FailureFit(
        exposure=Exposure(gpu_hours, job_hours, gpu_hours / gpus_per_node / 24.0),
        categories=fits,
        lemon_nodes=lemons,
        job_mttf_h=predict_job_mttf(fits, sizes, gpus_per_node),
        observed_mttf_h=observed,
        mttf_curve_h=predict_job_mttf(
            fits, _curve_sizes([*sizes, *(o.gpus for o in observed)]), gpus_per_node
        ),
        gpus_per_node=gpus_per_node,
        nodes=int(nodes),
        jobs=int(jobs["job_id"].nunique()),
        segments=len(jobs),
        incidents=len(incidents),
        notes=notes,
        cluster_lemons=cluster_lemons(lemons, int(nodes)),
    )
