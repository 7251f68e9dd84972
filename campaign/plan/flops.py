"""Parameters and training FLOPs of a decoder-only transformer, and the published FLOP conventions.

The model family comes from the config: `model.mlp` (swiglu: three h x ffn matrices; gelu: two),
`model.tied_embeddings` (one V x h matrix or two), `model.position` (learned: a seq_len x h table, no FLOPs).
Two conventions are in use for model FLOPs per token (both exclude recomputation; both count the logits once):
* causal (Megatron-Core `num_floating_point_operations` since late 2024, the plan's MFU):
  6 x (layer matmul parameters + h*V) + 6*l*h*s (QK^T and AV halved by the causal mask);
* non-causal (`causal=False`): 6 x (...) + 12*l*h*s. This is how Narayanan et al. 2021 (72 B s l h^2 (1 + s/6h +
  V/12lh)), Korthikanti et al. 2022 (the same 72 form) and the Megatron-Core README table of 2024 (the
  `num_floating_point_operations` of that year: 12 B s l h^2 ((1 + g/a + s/h) + ffn/h x gated + V/2lh)) count.
PaLM (Chowdhery et al. 2022, App. B; the MFU Llama 3 reports) counts 6N + 12 L H Q T: all parameters, attention
non-causal. Each paper's formula is also written out below exactly as published, and the reference tests check
that the general form reproduces it.
Source: Narayanan et al. 2021 (SC'21, arXiv 2104.04473, §5.1 FLOPs formula); Korthikanti et al. 2022 (arXiv
2205.05198, appendix: model FLOPs and HFU); Megatron-LM `megatron/training/training.py::num_floating_point_operations`
(2024 form without the causal halving; the causal factor was added later).
"""

from __future__ import annotations

from typing import Literal

from campaign.config import ModelConfig

Recompute = Literal["none", "selective", "full"]


def head_dim(model: ModelConfig) -> int:
    return model.hidden // model.heads


def kv_hidden(model: ModelConfig) -> int:
    """Width of the K (or V) projection: kv_heads x head_dim (= hidden for multi-head attention)."""
    return model.kv_heads * head_dim(model)


def mlp_matrices(model: ModelConfig) -> int:
    """h x ffn matrices in one MLP: 3 for SwiGLU (gate, up, down), 2 for GeLU (up, down)."""
    return 3 if model.mlp == "swiglu" else 2


def layer_matmul_parameters(model: ModelConfig) -> int:
    """Weights of one transformer layer that take part in matrix multiplies (Q, K, V, O and the MLP)."""
    h = model.hidden
    attention = 2 * h * h + 2 * h * kv_hidden(model)
    return attention + mlp_matrices(model) * h * model.ffn_hidden


def layer_parameters(model: ModelConfig) -> int:
    """All weights of one transformer layer: matmul weights and two norm scales (biases left out)."""
    return layer_matmul_parameters(model) + 2 * model.hidden


def embedding_parameters(model: ModelConfig) -> int:
    """The input-side weights: the V x h token embedding plus the learned position table, if any."""
    positions = model.seq_len * model.hidden if model.position == "learned" else 0
    return model.vocab * model.hidden + positions


def output_parameters(model: ModelConfig) -> int:
    """The output layer's own weights: V x h, or 0 when tied (the last stage then holds a copy of the embedding,
    counted by the memory model, not here) — plus the final norm."""
    return (0 if model.tied_embeddings else model.vocab * model.hidden) + model.hidden


def parameter_count(model: ModelConfig) -> int:
    """Parameters of a decoder-only transformer: GQA attention (Q, K, V, O), the MLP of `model.mlp`, two norm
    scales per layer and a final norm, one or two V x h matrices (`tied_embeddings`) and a learned position table
    (`position: learned`). Biases are left out (under 0.01 % of any model here)."""
    return model.layers * layer_parameters(model) + embedding_parameters(model) + output_parameters(model)


def attention_flops_per_token_layer(
    model: ModelConfig, *, causal: bool = True, seq_len: int | None = None
) -> float:
    """Forward QK^T and AV FLOPs per token per layer: 4*s*h, halved under a causal mask."""
    s = model.seq_len if seq_len is None else seq_len
    return (2.0 if causal else 4.0) * s * model.hidden


def layer_flops_per_token(model: ModelConfig, recompute: Recompute = "none", *, causal: bool = True) -> float:
    """Forward + backward FLOPs per token of one transformer layer, with the forward work recompute repeats.

    none: 3 x forward; selective: + the attention core forward; full: + the whole layer forward.
    """
    linear_fwd = 2.0 * layer_matmul_parameters(model)
    attn_fwd = attention_flops_per_token_layer(model, causal=causal)
    flops = 3.0 * (linear_fwd + attn_fwd)
    if recompute == "selective":
        flops += attn_fwd
    elif recompute == "full":
        flops += linear_fwd + attn_fwd
    return flops


def logits_flops_per_token(model: ModelConfig) -> float:
    """Forward + backward FLOPs of the output layer (h x V) per token; never recomputed."""
    return 6.0 * model.hidden * model.vocab


def model_flops_per_token(model: ModelConfig, *, causal: bool = True) -> float:
    """Model FLOPs per trained token (no recomputation): the numerator of MFU."""
    return model.layers * layer_flops_per_token(model, "none", causal=causal) + logits_flops_per_token(model)


def hardware_flops_per_token(model: ModelConfig, recompute: Recompute, *, causal: bool = True) -> float:
    """FLOPs the GPUs execute per token, recomputation included: the numerator of HFU."""
    return model.layers * layer_flops_per_token(model, recompute, causal=causal) + logits_flops_per_token(
        model
    )


# ------------------------------------------------------------------ each paper's formula, as published


def narayanan_flops_per_iteration(
    batch: int, seq_len: int, layers: int, hidden: int, vocab: int, *, full_recompute: bool = True
) -> float:
    """Narayanan et al. 2021 eq. (GPT, 4h GeLU MLP): 96 (or 72 without recompute) B s l h^2 (1 + s/6h + V/16lh)
    (V/12lh without recompute). Korthikanti et al. 2022 count model FLOPs with the same 72 form."""
    if full_recompute:
        return (
            96.0
            * batch
            * seq_len
            * layers
            * hidden**2
            * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))
        )
    return (
        72.0
        * batch
        * seq_len
        * layers
        * hidden**2
        * (1 + seq_len / (6 * hidden) + vocab / (12 * layers * hidden))
    )


def megatron_core_2024_flops_per_iteration(model: ModelConfig, batch: int) -> float:
    """Megatron-LM `num_floating_point_operations` as of 2024 (the README H100 table): expansion 3 x 2 x 2,
    12 B s l h^2 ((1 + g/a + s/h) + ffn/h x (3/2 if gated) + V/(2 l h)), attention not halved for causality."""
    s, h, layers = model.seq_len, model.hidden, model.layers
    gated = 1.5 if model.mlp == "swiglu" else 1.0
    return (
        12.0
        * batch
        * s
        * layers
        * h
        * h
        * (
            (1 + model.kv_heads / model.heads + s / h)
            + model.ffn_hidden / h * gated
            + model.vocab / (2 * layers * h)
        )
    )


def palm_flops_per_token(model: ModelConfig) -> float:
    """PaLM's model FLOPs per token (Chowdhery et al. 2022, arXiv 2204.02311, App. B), the MFU definition Llama 3
    cites for its Table 4 (arXiv 2407.21783 §3.3.2, "MFU; Chowdhery et al."): 6 N + 12 L H Q T with N all the
    parameters (embeddings included), H heads of dimension Q and T the sequence length: attention counted over the
    whole T x T score matrix, not halved by the causal mask."""
    return 6.0 * parameter_count(model) + 12.0 * model.layers * model.heads * head_dim(model) * model.seq_len
