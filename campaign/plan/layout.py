"""Which parallel layouts are legal on a cluster, and a search over all of them ranked by throughput.

Rules: tp stays inside one NVLink domain and divides it (TP's per-layer collectives are latency-bound and
would cross the scale-out network otherwise); tp divides heads, kv_heads and ffn_hidden; cp*2 divides seq_len
(load-balanced causal CP) and CP needs fused attention (it merges partial softmax results by their log-sum-exp);
the global batch splits into micro_batch x dp; vpp > 1 needs pp > 1, pp*vpp <=
layers + 2 and a micro-batch count divisible by pp (Megatron's interleaved schedule). tp*cp may exceed the NVLink
domain (Llama 3 ran cp=16 x tp=8 at 128K context): legal, with a note, and the CP exchange is priced on the NIC.
Whether CP pays off for a sequence length is the step-time model's answer (exchange, imbalance, chunk-length
attention efficiency), not a rule.
Source: Megatron-LM `arguments.py` divisibility checks and `pipeline_parallel/schedules.py` (interleaving); Llama 3 (arXiv 2407.21783) §3.3.2; Calculon
(`_check_network_assignments`: tier-0 product within the NVLink domain).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from campaign.config import CampaignConfig, LayoutConfig

# Search bound: micro-batches larger than this are not enumerated (memory rules them out at LLM scale).
MAX_SEARCH_MICRO_BATCH = 16


@dataclass(frozen=True)
class Violation:
    rule: str  # "layout", "memory" or "schedule"
    message: str  # what is wrong and how to fix it

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


def _divisors(n: int) -> list[int]:
    small = [i for i in range(1, int(n**0.5) + 1) if n % i == 0]
    return sorted(set(small + [n // i for i in small]))


def layout_violations(config: CampaignConfig, layout: LayoutConfig, micro_batch: int) -> list[Violation]:
    """Layout rule breaches of a candidate layout on the config's cluster and model."""
    out: list[Violation] = []
    cl, m = config.cluster, config.model
    domain = cl.network.nvlink_domain_gpus
    t, c = layout.tp, layout.cp
    if layout.world != cl.gpus:
        out.append(
            Violation(
                "layout",
                (
                    f"tp x pp x dp x cp = {t}x{layout.pp}x{layout.dp}x{c} = {layout.world} GPUs but the cluster has "
                    f"{cl.gpus}; change dp to {cl.gpus // max(1, t * layout.pp * c)} or the node count"
                ),
            )
        )
    if t > domain:
        spans = -(-t // domain)
        out.append(
            Violation(
                "layout",
                (
                    f"tp={t} spans {spans} NVLink domains of {domain} GPUs: TP traffic would cross the scale-out "
                    f"network; use tp<={domain}"
                ),
            )
        )
    elif domain % t:
        out.append(
            Violation(
                "layout",
                (
                    f"tp={t} does not divide the NVLink domain of {domain} GPUs: some TP groups would straddle two "
                    f"domains; use a divisor of {domain}"
                ),
            )
        )
    for name, value in (("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn_hidden", m.ffn_hidden)):
        if value % t:
            out.append(
                Violation(
                    "layout", f"tp={t} does not divide model.{name} ({value}); use a divisor of {value}"
                )
            )
    if c > 1 and m.seq_len % (2 * c):
        out.append(
            Violation(
                "layout",
                (
                    f"cp={c}: load-balanced causal context parallelism splits the sequence into 2 x cp chunks, but "
                    f"seq_len {m.seq_len} is not divisible by {2 * c}; use a cp with 2*cp dividing {m.seq_len}"
                ),
            )
        )
    if c > 1 and config.plan.attention != "flash":
        out.append(
            Violation(
                "layout",
                (
                    f"cp={c} needs fused attention: ring and all-gather context parallelism merge partial softmax "
                    "results with the log-sum-exp a fused kernel returns (Megatron-Core / Transformer Engine); set "
                    "plan.attention: flash or cp=1"
                ),
            )
        )
    sequences = config.plan.global_batch_tokens // m.seq_len
    if sequences % (micro_batch * layout.dp):
        out.append(
            Violation(
                "layout",
                (
                    f"a global batch of {sequences} sequences does not split into micro_batch x dp = "
                    f"{micro_batch}x{layout.dp}; pick micro_batch x dp dividing {sequences}"
                ),
            )
        )
    if layout.vpp > 1 and layout.pp == 1:
        out.append(
            Violation("layout", "vpp > 1 needs pp > 1 (interleaving splits pipeline stages); set vpp=1")
        )
    micro_batches = sequences // max(1, micro_batch * layout.dp)
    if layout.vpp > 1 and layout.pp > 1 and micro_batches % layout.pp:
        out.append(
            Violation(
                "layout",
                (
                    f"the interleaved schedule (vpp={layout.vpp}) needs the {micro_batches} micro-batches per pipeline to be "
                    f"a multiple of pp={layout.pp}; change the global batch, micro_batch or dp, or set vpp=1"
                ),
            )
        )
    if layout.pp * layout.vpp > m.layers + 2:
        out.append(
            Violation(
                "layout",
                (
                    f"pp x vpp = {layout.pp * layout.vpp} stages is more than layers + 2 = {m.layers + 2}; lower pp or vpp"
                ),
            )
        )
    return out


class LayoutShape(Protocol):
    """The five parallel degrees: a `LayoutConfig`, or a search's `Candidate` (what the step and memory models read)."""

    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def vpp(self) -> int: ...


def layout_config(shape: LayoutShape) -> LayoutConfig:
    """`shape` as the config model (itself when it is one)."""
    if isinstance(shape, LayoutConfig):
        return shape
    return LayoutConfig(tp=shape.tp, pp=shape.pp, dp=shape.dp, cp=shape.cp, vpp=shape.vpp)


class Candidate(NamedTuple):
    """A legal layout and micro-batch as plain integers (what a search enumerates; `layout()` is the config)."""

    tp: int
    pp: int
    dp: int
    cp: int
    vpp: int
    micro_batch: int

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def layout(self) -> LayoutConfig:
        return LayoutConfig(tp=self.tp, pp=self.pp, dp=self.dp, cp=self.cp, vpp=self.vpp)


def candidates(config: CampaignConfig) -> list[Candidate]:
    """Every legal (layout, micro_batch) for the cluster's GPU count that the stack can run (`plan.stack`: no cp > 1
    without context parallelism, no vpp > 1 without interleaved stages). Interleaving (vpp > 1) is enumerated only
    for balanced splits (pp*vpp divides layers, or layers + 2 as Llama 3 did) and micro-batch counts divisible by
    pp; vpp = 1 may split unevenly."""
    cl, m, stack = config.cluster, config.model, config.plan.stack
    gpus, domain, layers = cl.gpus, cl.network.nvlink_domain_gpus, m.layers
    sequences = config.plan.global_batch_tokens // m.seq_len
    out: list[Candidate] = []
    for t in _divisors(domain):
        if gpus % t or m.heads % t or m.kv_heads % t or m.ffn_hidden % t:
            continue
        for c in _divisors(gpus // t):
            if c > 1 and (
                m.seq_len % (2 * c) or not stack.context_parallel or config.plan.attention != "flash"
            ):
                continue
            for p in _divisors(gpus // (t * c)):
                if p > layers + 2:
                    continue
                d = gpus // (t * c * p)
                if sequences % d:
                    continue
                vpps = [1] + [
                    v
                    for v in range(2, (layers + 2) // p + 1)
                    if p > 1
                    and stack.interleaved_pipeline
                    and (layers % (p * v) == 0 or (layers + 2) % (p * v) == 0)
                ]
                bs = [b for b in _divisors(sequences // d) if b <= MAX_SEARCH_MICRO_BATCH]
                for v in vpps:
                    out.extend(
                        Candidate(t, p, d, c, v, b) for b in bs if v == 1 or (sequences // (d * b)) % p == 0
                    )
    return out


def candidate_layouts(config: CampaignConfig) -> list[tuple[LayoutConfig, int]]:
    """`candidates` as (LayoutConfig, micro_batch) pairs."""
    return [(c.layout(), c.micro_batch) for c in candidates(config)]
