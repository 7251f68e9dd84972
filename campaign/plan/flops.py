"""Parameters and training FLOPs of a decoder-only transformer, in one convention.

Convention (Megatron-Core `num_floating_point_operations`): model FLOPs per token are
6 x (layer matmul parameters + logits h*V) + 6*l*h*s with causal attention (QK^T and AV halved by the mask).
Model FLOPs exclude recomputation and give MFU; hardware FLOPs add the recomputed forward work and give the
time the kernels spend. `causal=False` gives the PaLM / Narayanan et al. 2021 form (12*l*h*s) for comparison.
Source: Narayanan et al. 2021 (SC'21, "Efficient Large-Scale Language Model Training on GPU Clusters", FLOPs
formula); Korthikanti et al. 2022 (arXiv 2205.05198, MFU/HFU); Megatron-LM `training.py::num_floating_point_operations`.
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


def layer_matmul_parameters(model: ModelConfig, *, gated_mlp: bool = True) -> int:
    """Weights of one transformer layer that take part in matrix multiplies (Q, K, V, O and the MLP)."""
    h = model.hidden
    attention = 2 * h * h + 2 * h * kv_hidden(model)
    mlp = (3 if gated_mlp else 2) * h * model.ffn_hidden
    return attention + mlp


def layer_parameters(model: ModelConfig, *, gated_mlp: bool = True) -> int:
    """All weights of one transformer layer: matmul weights and two norm scales (no biases, Llama style)."""
    return layer_matmul_parameters(model, gated_mlp=gated_mlp) + 2 * model.hidden


def embedding_parameters(model: ModelConfig) -> int:
    """One vocabulary matrix, V x h (the input embedding; the untied output layer is another)."""
    return model.vocab * model.hidden


def total_parameters(model: ModelConfig, *, gated_mlp: bool = True, tied_embeddings: bool = False) -> int:
    """Parameters of the whole model; equals `campaign.config.parameter_count` for the Llama defaults."""
    embeddings = embedding_parameters(model) * (1 if tied_embeddings else 2)
    return model.layers * layer_parameters(model, gated_mlp=gated_mlp) + embeddings + model.hidden


def attention_flops_per_token_layer(model: ModelConfig, *, causal: bool = True) -> float:
    """Forward QK^T and AV FLOPs per token per layer: 4*s*h, halved under a causal mask."""
    return (2.0 if causal else 4.0) * model.seq_len * model.hidden


def layer_flops_per_token(
    model: ModelConfig, recompute: Recompute = "none", *, gated_mlp: bool = True, causal: bool = True
) -> float:
    """Forward + backward FLOPs per token of one transformer layer, with the forward work recompute repeats.

    none: 3 x forward; selective: + the attention core forward; full: + the whole layer forward.
    """
    linear_fwd = 2.0 * layer_matmul_parameters(model, gated_mlp=gated_mlp)
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


def model_flops_per_token(model: ModelConfig, *, gated_mlp: bool = True, causal: bool = True) -> float:
    """Model FLOPs per trained token (no recomputation): the numerator of MFU."""
    return model.layers * layer_flops_per_token(model, "none", gated_mlp=gated_mlp, causal=causal) + (
        logits_flops_per_token(model)
    )


def hardware_flops_per_token(
    model: ModelConfig, recompute: Recompute, *, gated_mlp: bool = True, causal: bool = True
) -> float:
    """FLOPs the GPUs execute per token, recomputation included: the numerator of HFU."""
    return model.layers * layer_flops_per_token(model, recompute, gated_mlp=gated_mlp, causal=causal) + (
        logits_flops_per_token(model)
    )


def narayanan_flops_per_iteration(
    batch: int, seq_len: int, layers: int, hidden: int, vocab: int, *, full_recompute: bool = True
) -> float:
    """Narayanan et al. 2021 eq. (GPT, 4h GeLU MLP): 96 (or 72 without recompute) B s l h^2 (1 + s/6h + V/16lh)."""
    if full_recompute:
        return 96.0 * batch * seq_len * layers * hidden**2 * (
            1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden)
        )
    return 72.0 * batch * seq_len * layers * hidden**2 * (1 + seq_len / (6 * hidden) + vocab / (12 * layers * hidden))
