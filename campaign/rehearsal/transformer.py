"""A small decoder-only transformer in JAX, shaped like the campaign's model (Llama style) scaled down.

Pre-norm blocks with RMSNorm, rotary position embeddings, grouped-query attention (`heads` query heads sharing
`kv_heads` key/value heads), a SwiGLU feed-forward layer and untied input and output embeddings: the
architecture `campaign.plan.flops.parameter_count` counts. Parameters are a plain dict of arrays (a pytree), so
optax updates them and a checkpoint stores them as named arrays.

Source: Touvron et al. 2023, "LLaMA" (arXiv 2302.13971) §2.2 (RMSNorm, SwiGLU, RoPE); Ainslie et al. 2023,
"GQA" (arXiv 2305.13245); Su et al. 2021, "RoFormer" (arXiv 2104.09864) for the rotary embedding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp

Params = dict[str, jax.Array]


@dataclass(frozen=True)
class TransformerShape:
    """The shape of the rehearsal model (the same fields as the campaign's `model:` section)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def init_params(shape: TransformerShape, key: jax.Array) -> Params:
    """Parameters drawn from `key`: normal(0, 0.02) matrices (GPT-2's init), output layers scaled by depth."""
    d, f, kv = shape.hidden, shape.ffn_hidden, shape.kv_heads * shape.head_dim
    std = 0.02
    out_std = std / (2 * shape.layers) ** 0.5  # GPT-2: residual projections scaled by 1/sqrt(2 x layers)
    params: Params = {}
    keys = iter(jax.random.split(key, 2 + 7 * shape.layers))

    def normal(shape_: tuple[int, ...], scale: float) -> jax.Array:
        return scale * jax.random.normal(next(keys), shape_, dtype=jnp.float32)

    params["embed"] = normal((shape.vocab, d), std)
    for i in range(shape.layers):
        p = f"layer{i}."
        params[p + "attn_norm"] = jnp.ones((d,), jnp.float32)
        params[p + "wq"] = normal((d, d), std)
        params[p + "wk"] = normal((d, kv), std)
        params[p + "wv"] = normal((d, kv), std)
        params[p + "wo"] = normal((d, d), out_std)
        params[p + "mlp_norm"] = jnp.ones((d,), jnp.float32)
        params[p + "w_gate"] = normal((d, f), std)
        params[p + "w_up"] = normal((d, f), std)
        params[p + "w_down"] = normal((f, d), out_std)
    params["final_norm"] = jnp.ones((d,), jnp.float32)
    params["unembed"] = normal((d, shape.vocab), std)
    return params


def parameter_count(params: Params) -> int:
    return int(sum(v.size for v in params.values()))


def _rms_norm(x: jax.Array, weight: jax.Array, eps: float = 1e-5) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rotary(x: jax.Array, base: float = 10000.0) -> jax.Array:
    """Rotate pairs of channels by a position-dependent angle; x is [batch, seq, heads, head_dim]."""
    seq, dim = x.shape[1], x.shape[-1]
    inv_freq = 1.0 / (base ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    rotated = jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return rotated.reshape(x.shape)


def _attention(x: jax.Array, params: Params, prefix: str, shape: TransformerShape) -> jax.Array:
    b, t, _ = x.shape
    h, kvh, hd = shape.heads, shape.kv_heads, shape.head_dim
    q = (x @ params[prefix + "wq"]).reshape(b, t, h, hd)
    k = (x @ params[prefix + "wk"]).reshape(b, t, kvh, hd)
    v = (x @ params[prefix + "wv"]).reshape(b, t, kvh, hd)
    q, k = _rotary(q), _rotary(k)
    group = h // kvh  # each key/value head serves `group` query heads
    k = jnp.repeat(k, group, axis=2)
    v = jnp.repeat(v, group, axis=2)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(hd))
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    scores = jnp.where(causal[None, None], scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, h * hd)
    return out @ params[prefix + "wo"]


def _mlp(x: jax.Array, params: Params, prefix: str) -> jax.Array:
    gate = jax.nn.silu(x @ params[prefix + "w_gate"])
    return (gate * (x @ params[prefix + "w_up"])) @ params[prefix + "w_down"]


def logits(params: Params, tokens: jax.Array, shape: TransformerShape) -> jax.Array:
    """Next-token logits [batch, seq, vocab] for token ids [batch, seq]."""
    x = params["embed"][tokens]
    for i in range(shape.layers):
        p = f"layer{i}."
        x = x + _attention(_rms_norm(x, params[p + "attn_norm"]), params, p, shape)
        x = x + _mlp(_rms_norm(x, params[p + "mlp_norm"]), params, p)
    return _rms_norm(x, params["final_norm"]) @ params["unembed"]


def loss(params: Params, batch: jax.Array, shape: TransformerShape) -> jax.Array:
    """Mean next-token cross-entropy (nats) of a batch [batch, seq_len + 1]: inputs [:, :-1], targets [:, 1:]."""
    inputs, targets = batch[:, :-1], batch[:, 1:]
    log_probs = jax.nn.log_softmax(logits(params, inputs, shape), axis=-1)
    picked = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    return -jnp.mean(picked)
