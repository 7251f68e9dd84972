"""Kernel times on one GPU: GEMMs by shape, fused attention by sequence length and head dim, memory-bound work.

* GEMM (M x K) @ (K x N): the output is cut into tiles (the best of TILES) that run in waves of `sm_count`; a
  partial last wave idles the rest (wave quantization). Each tile pays a prologue/epilogue that a short K cannot hide:
  efficiency = gemm_peak_fraction x wave_efficiency x K / (K + gemm_half_k). The kernel cannot run faster than
  its operands and result move through HBM (roofline): time = max(2MNK / (peak x eff), bytes / HBM).
* Fused (flash) attention: FLOPs / (peak x attention_peak_fraction x s/(s + FA_HALF_SEQ) x d-factor), with
  the backward pass 2.5x the forward's FLOPs (it recomputes the scores), the accounting FlashAttention-2 reports
  its fwd+bwd throughput in; the sequence and head-dim shape terms are fitted to FlashAttention-2's A100 curves.
  The peak fraction is the accelerator's best fused kernel unless the plan names FlashAttention-2
  (`plan.attention_kernel: flash2`, the accelerator's `flash2_peak_fraction`: 0.35 on H100, FlashAttention-3 abstract).
* Every kernel launch leaves the GPU idle for `kernel_gap_us` (launch latency, stream synchronisation, host
  work between kernels): small models, whose kernels are short, lose a larger share of the step to it.
* Memory-bound kernels (norms, residuals, dropout, activation functions, RoPE, softmax of materialized scores,
  cross entropy, the optimizer step): bytes moved / (hbm_gb_per_s x memory_bw_fraction).
Source: NVIDIA "Matrix Multiplication Background User's Guide" (tile and wave quantization); Williams, Waterman &
Patterson 2009 (roofline); Dao 2023, FlashAttention-2 (arXiv 2307.08691) Fig. 4-6 and §4.1 (fwd+bwd FLOPs
= 3.5x forward; A100 fwd+bwd up to 72 % of peak); the family calibration comes from benchmarks/plan/calibrate.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from campaign.config import AcceleratorConfig

# Output tiles cuBLAS / CUTLASS choose among for large BF16 GEMMs on Ampere and Hopper, with the relative rate of
# each (a 128 x 128 tile reuses each loaded operand less: an assumption of 0.9 of the large tiles' rate). The
# library heuristic picks the tile with the least wave-quantization loss; so does this model.
TILES = ((128, 256, 1.0), (256, 128, 1.0), (128, 128, 0.9))
# FlashAttention-2 fwd+bwd (A100, causal, d = 128): ~102 TFLOP/s at 512 tokens, ~153 at 2K, ~176 at 16K: fits
# s / (s + 400). Head dim 64 runs at ~0.84 of head dim 128 at 2K: fits d / (d + 32).
FA_HALF_SEQ = 400.0
FA_HALF_HEAD_DIM = 32.0
FA_REFERENCE_HEAD_DIM = 128.0
# FLOPs of a flash backward pass relative to its forward (FlashAttention-2 §4.1: 2.5x, scores recomputed).
FA_BACKWARD_FLOPS = 2.5


@dataclass(frozen=True)
class Kernels:
    """The calibrated kernel model of one accelerator."""

    peak_flops: float  # FLOP/s, dense BF16
    memory_bytes_per_s: float  # achieved by memory-bound kernels
    hbm_bytes_per_s: float  # peak, for the GEMM roofline
    sm_count: int
    gemm_peak_fraction: float
    gemm_half_k: float
    attention_peak_fraction: float
    gap_s: float  # idle time between consecutive kernels

    @classmethod
    def from_accelerator(cls, acc: AcceleratorConfig, attention_kernel: str = "fused") -> Kernels:
        """The accelerator's calibrated kernels; `attention_kernel` picks the fused attention generation
        (fused: the family's best, flash2: FlashAttention-2 where the accelerator file states its rate)."""
        k = acc.kernels
        attention = k.attention_peak_fraction
        if attention_kernel == "flash2" and k.flash2_peak_fraction is not None:
            attention = k.flash2_peak_fraction
        return cls(
            peak_flops=acc.peak_bf16_tflops * 1e12,
            memory_bytes_per_s=acc.hbm_gb_per_s * 1e9 * k.memory_bw_fraction,
            hbm_bytes_per_s=acc.hbm_gb_per_s * 1e9,
            sm_count=acc.sm_count,
            gemm_peak_fraction=k.gemm_peak_fraction,
            gemm_half_k=k.gemm_half_k,
            attention_peak_fraction=attention,
            gap_s=k.kernel_gap_us * 1e-6,
        )

    def gemm_efficiency(self, m: int, n: int, k: int, batch: int = 1) -> float:
        """Fraction of peak a (batched) GEMM of this shape reaches, before the memory roofline."""
        best = 0.0
        sms = self.sm_count
        for tile_m, tile_n, rate in TILES:
            tiles = batch * (-(-m // tile_m)) * (-(-n // tile_n))
            eff = rate * tiles / (-(-tiles // sms) * sms)
            if eff > best:  # a plain compare is faster than max() in this hot loop
                best = eff
        return self.gemm_peak_fraction * best * k / (k + self.gemm_half_k)

    def gemm_s(self, m: float, n: float, k: float, batch: int = 1) -> float:
        """Seconds of a BF16 GEMM (M x K) @ (K x N), `batch` of them in one batched kernel."""
        mi, ni, ki = max(1, round(m)), max(1, round(n)), max(1, round(k))
        flops = 2.0 * mi * ni * ki * batch
        compute = flops / (self.peak_flops * self.gemm_efficiency(mi, ni, ki, batch))
        traffic = 2.0 * (mi * ki + ki * ni + mi * ni) * batch / self.hbm_bytes_per_s
        return max(compute, traffic)

    def gemm_fwd_bwd_s(self, m: float, n: float, k: float) -> tuple[float, float]:
        """(forward, backward) seconds of a linear layer: forward (M,N,K); backward the data gradient (M,K,N)
        and the weight gradient (K,N,M)."""
        return self.gemm_s(m, n, k), self.gemm_s(m, k, n) + self.gemm_s(k, n, m)

    def attention_efficiency(self, seq: float, head_dim: float) -> float:
        """Fraction of peak a fused attention kernel reaches on blocks of `seq` keys with this head dim."""
        d_factor = (head_dim / (head_dim + FA_HALF_HEAD_DIM)) / (
            FA_REFERENCE_HEAD_DIM / (FA_REFERENCE_HEAD_DIM + FA_HALF_HEAD_DIM)
        )
        return self.attention_peak_fraction * seq / (seq + FA_HALF_SEQ) * min(d_factor, 1.2)

    def flash_attention_s(self, forward_flops: float, seq: float, head_dim: float) -> tuple[float, float]:
        """(forward, backward) seconds of fused attention doing `forward_flops` of QK^T and AV in the forward."""
        rate = self.peak_flops * self.attention_efficiency(seq, head_dim)
        return forward_flops / rate, FA_BACKWARD_FLOPS * forward_flops / rate

    def memory_s(self, bytes_: float) -> float:
        """Seconds of memory-bound kernels moving `bytes_` through HBM."""
        return bytes_ / self.memory_bytes_per_s
