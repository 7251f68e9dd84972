"""The `model:` section: the transformer's shape (its parameter count is derived, never typed in)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from campaign.config.schema.base import SOURCE_FIELD, Frozen, Source


class ModelConfig(Frozen):
    name: str = Field("model", description="Model name.")
    layers: int = Field(gt=0, le=10_000, description="Transformer layers.")
    hidden: int = Field(gt=0, le=1_000_000, description="Hidden size.")
    heads: int = Field(gt=0, le=100_000, description="Attention (query) heads.")
    kv_heads: int = Field(
        gt=0, le=100_000, description="Key/value heads (grouped-query attention; = heads for MHA)."
    )
    ffn_hidden: int = Field(
        gt=0,
        le=10_000_000,
        description=(
            "Feed-forward inner size (swiglu: gate and up matrices of this width, then down; gelu: up and down)."
        ),
    )
    vocab: int = Field(gt=0, le=100_000_000, description="Vocabulary size.")
    seq_len: int = Field(gt=0, le=100_000_000, description="Training sequence length, tokens.")
    mlp: Literal["swiglu", "gelu"] = Field(
        "swiglu",
        description=("MLP family: swiglu (Llama: three h x ffn matrices) or gelu (GPT-3 / Megatron: two)."),
    )
    tied_embeddings: bool = Field(
        False,
        description=(
            "One V x h matrix serves as input embedding and output layer (GPT-3 / Megatron 2021-2022)."
        ),
    )
    position: Literal["rope", "learned"] = Field(
        "rope",
        description=(
            "Position encoding: rope (no weights) or learned (a seq_len x h table, GPT-3 / Megatron)."
        ),
    )
    dropout: bool = Field(
        False,
        description=(
            "Dropout after attention and MLP and on materialized attention probabilities (GPT-3 / Megatron 0.1; "
            "Llama none): extra memory-bound work and stored masks."
        ),
    )
    source: Source = SOURCE_FIELD

    @model_validator(mode="after")
    def _shapes(self) -> ModelConfig:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads})")
        return self
