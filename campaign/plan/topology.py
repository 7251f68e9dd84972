"""Collective times on a hierarchical GPU fabric: NVLink domains, non-blocking pods, oversubscribed spine.

A group of ranks with a fixed stride in the rank order has k1 members in each NVLink domain, k2 domains in
each pod and k3 pods. A hierarchical (2-3 level) ring reduce-scatter costs
(k1-1)/k1 M/B_nvl + (k2-1)/k2 (M/k1)/B_nic + (k3-1)/k3 (M/k1k2)/(B_nic/o) plus alpha per ring step; an
all-gather costs the same and an all-reduce twice that. Bandwidths are per-GPU bus bandwidths (nccl-tests busbw),
so every GPU uses its own NIC (rail-optimised fabric).
Source: Thakur, Rabenseifner & Gropp 2005 (alpha-beta ring collectives); NVIDIA nccl-tests doc/PERFORMANCE.md
(busbw); SimAI calbusbw.cc (effective NVLink/NIC bandwidths); Llama 3 (arXiv 2407.21783) §3.3.1 (pods, 1:7).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from campaign.config import ClusterConfig

# Per-step latencies of one ring hop, seconds: NCCL's tuning model (src/graph/tuning.cc, Simple protocol)
# uses ~3.4 us on NVLink and ~9.6 us over the network per ring step.
NVLINK_ALPHA_S = 3.4e-6
NETWORK_ALPHA_S = 9.6e-6


@dataclass(frozen=True)
class Fabric:
    """The parts of a cluster's network a collective's time depends on."""

    domain_gpus: int  # GPUs per NVLink domain
    pod_gpus: int  # GPUs per non-blocking pod
    nvlink_gb_per_s: float  # per-GPU busbw inside a domain
    nic_gb_per_s: float  # per-GPU busbw between domains inside a pod
    oversubscription: float  # between pods the per-GPU bandwidth is nic / oversubscription

    @classmethod
    def from_cluster(cls, cluster: ClusterConfig) -> Fabric:
        net = cluster.network
        return cls(
            domain_gpus=net.nvlink_domain_gpus,
            pod_gpus=max(net.pod_gpus, net.nvlink_domain_gpus),
            nvlink_gb_per_s=net.nvlink_gb_per_s,
            nic_gb_per_s=net.nic_gb_per_s,
            oversubscription=net.oversubscription,
        )


@dataclass(frozen=True)
class Placement:
    """How a communication group of `size` ranks spreads over the fabric."""

    size: int
    in_domain: int  # k1: members sharing one NVLink domain
    domains: int  # k2: domains per pod the group touches
    pods: int  # k3: pods the group spans

    @property
    def crosses_domain(self) -> bool:
        return self.domains > 1 or self.pods > 1

    @property
    def crosses_pod(self) -> bool:
        return self.pods > 1


@lru_cache(maxsize=4096)
def place_group(size: int, stride: int, fabric: Fabric) -> Placement:
    """Placement of a group whose members are `stride` ranks apart, ranks filling domains and pods in order."""
    if size <= 1:
        return Placement(size=1, in_domain=1, domains=1, pods=1)
    k1 = max(1, min(size, fabric.domain_gpus // stride))
    per_pod = max(1, min(size, fabric.pod_gpus // stride))
    k1 = min(k1, per_pod)
    k2 = -(-per_pod // k1)
    k3 = -(-size // per_pod)
    return Placement(size=size, in_domain=k1, domains=k2, pods=k3)


def _level_time_s(bytes_: float, members: int, gb_per_s: float, alpha_s: float) -> float:
    if members <= 1 or bytes_ <= 0:
        return 0.0
    return (members - 1) * alpha_s + (members - 1) / members * bytes_ / (gb_per_s * 1e9)


def reduce_scatter_s(bytes_: float, placement: Placement, fabric: Fabric) -> float:
    """Hierarchical ring reduce-scatter of `bytes_` per GPU (the same time serves an all-gather of the result)."""
    k1, k2, k3 = placement.in_domain, placement.domains, placement.pods
    t = _level_time_s(bytes_, k1, fabric.nvlink_gb_per_s, NVLINK_ALPHA_S)
    t += _level_time_s(bytes_ / k1, k2, fabric.nic_gb_per_s, NETWORK_ALPHA_S)
    t += _level_time_s(bytes_ / (k1 * k2), k3, fabric.nic_gb_per_s / fabric.oversubscription, NETWORK_ALPHA_S)
    return t


def all_gather_s(bytes_: float, placement: Placement, fabric: Fabric) -> float:
    """Hierarchical ring all-gather whose result is `bytes_` per GPU."""
    return reduce_scatter_s(bytes_, placement, fabric)


def all_reduce_s(bytes_: float, placement: Placement, fabric: Fabric) -> float:
    """Hierarchical ring all-reduce of `bytes_` per GPU: a reduce-scatter then an all-gather."""
    return 2.0 * reduce_scatter_s(bytes_, placement, fabric)


def p2p_s(bytes_: float, placement: Placement, fabric: Fabric) -> float:
    """One point-to-point message between neighbours of a group, priced at the slowest hop the group uses."""
    if bytes_ <= 0:
        return 0.0
    if placement.crosses_pod:
        return NETWORK_ALPHA_S + bytes_ / (fabric.nic_gb_per_s / fabric.oversubscription * 1e9)
    if placement.crosses_domain:
        return NETWORK_ALPHA_S + bytes_ / (fabric.nic_gb_per_s * 1e9)
    return NVLINK_ALPHA_S + bytes_ / (fabric.nvlink_gb_per_s * 1e9)
