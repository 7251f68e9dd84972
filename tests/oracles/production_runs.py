"""Published production runs: model, layout, batch and the step time the team reported over the long run.

The plan model's calibration tables (tests/oracles/published_runs.py) are best-case benchmark runs; these are
production pre-training runs on their own stacks, each published with its layout and throughput, used to judge how
far the uncalibrated model is from production (`campaign.plan.calibration.UNCALIBRATED_BAND`) and how well a
calibration on one measured run carries to the other scales of the same model and stack. Each row's step time is
the published iteration time, or derived from the published throughput in the publication's own FLOP convention:
* Megatron-Turing NLG 530B (Smith et al. 2022, arXiv 2201.11990, §2.4): global batch 1,920 x 2,048 on 280, 350 and
  420 DGX A100 servers, TP8 x PP35: 60.1, 50.2 and 44.4 s per iteration (126, 121, 113 TFLOP/s per GPU);
  Megatron-DeepSpeed, activation checkpointing;
* Nemotron-4 340B (NVIDIA 2024, arXiv 2406.11704, Table 2): TP8 x PP12 with DP 16, 32, 64 on H100 (1,536, 3,072,
  6,144 GPUs), batch 768, 1,536, 2,304 x 4,096: 10.3, 10.3 and 8.0 s per iteration (42.4, 42.3, 41.0 % MFU);
  Megatron-Core, distributed optimizer, interleaved pipeline;
* Llama 3 405B (arXiv 2407.21783, Table 4): 430, 400 and 380 TFLOP/s per GPU in PaLM's FLOP convention, on Meta's
  PyTorch FSDP stack (configs/campaigns/llama3-405b.yaml);
* BLOOM 176B (Le Scao et al. 2022, arXiv 2211.05100, §3.4; BigScience's training card): 384 A100 80GB, TP4 x PP12 x
  DP8, batch 2,048 x 2,048, "about 150 TFLOPs" per GPU in Megatron-DeepSpeed's count with activation checkpointing
  (Narayanan's 96 B s l h^2 (...) form), on Jean Zay's Omni-Path fabric.
Settings a publication does not state are named in ASSUMPTIONS. HELD_OUT is the split the band is judged on: the band
is derived from FITTED and checked on HELD_OUT (docs/plan-model.md#production-runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from campaign.config import CampaignConfig, load_config
from campaign.plan.flops import narayanan_flops_per_iteration, palm_flops_per_token
from tests.oracles.published_runs import DGX_H100, SELENE, accelerator

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "campaigns" / "demo.yaml"
LLAMA = REPO / "configs" / "campaigns" / "llama3-405b.yaml"

# Jean Zay's A100 partition: NVLink inside a node, 4 x Omni-Path 100 Gb/s per 8-GPU node (6.25 GB/s per GPU raw,
# about 5.5 effective), one non-blocking fabric at 48 nodes.
JEAN_ZAY = {
    "nvlink_domain_gpus": 8,
    "nvlink_gb_per_s": 240.0,
    "nic_gb_per_s": 5.5,
    "pod_gpus": 8192,
    "oversubscription": 1,
    "source": "Jean Zay A100 nodes: NVLink, 4 x Omni-Path 100 Gb/s per node (BigScience training card)",
}

ASSUMPTIONS = {
    "mtnlg530b": "micro-batch 1, no interleaving, ZeRO-1, materialized attention, full recompute without sequence "
    "parallelism, no overlap (Megatron-DeepSpeed of 2021); the Selene fabric of the calibration tables",
    "nemotron4_340b": "micro-batch 1, vpp 8 (one layer per virtual stage: not published), selective recompute, "
    "squared-ReLU MLP as a two-matrix (gelu-shaped) MLP, flash attention, sequence parallel, distributed "
    "optimizer and TP/DP overlap as Megatron-Core defaults",
    "llama3_405b": "the shipped config (configs/campaigns/llama3-405b.yaml) with the published layouts",
    "bloom176b": "micro-batch 2 (BigScience's tr11 script), ZeRO-1, materialized attention, full recompute, no "
    "sequence parallelism, no overlap; ALiBi priced as learned positions",
}


@dataclass(frozen=True)
class ProductionRun:
    family: str  # one model on one stack: mtnlg530b | nemotron4_340b | llama3_405b | bloom176b
    name: str
    config: CampaignConfig
    step_s: float  # the published step time (seconds per optimizer step)
    source: str

    @property
    def gpus(self) -> int:
        return self.config.plan.layout.world


def _base() -> dict:
    return load_config(DEMO).config.model_dump(mode="json", by_alias=True)


def _megatron_config(
    *,
    family: str,
    fabric: dict,
    model: dict,
    layout: dict,
    batch: int,
    micro_batch: int,
    plan: dict,
) -> CampaignConfig:
    base = _base()
    gpus = layout["tp"] * layout["pp"] * layout["dp"] * layout.get("cp", 1)
    cluster = dict(
        base["cluster"],
        name=f"{family}-production",
        nodes=gpus // 8,
        gpus_per_node=8,
        accelerator=accelerator(family),
        network=fabric,
    )
    plan_section = dict(
        {
            k: v for k, v in base["plan"].items() if k != "measured"
        },  # the demo's measured run is not this model's
        layout={"cp": 1, "vpp": 1, **layout},
        micro_batch=micro_batch,
        global_batch_tokens=batch * model["seq_len"],
        **plan,
    )
    return CampaignConfig.model_validate(dict(base, cluster=cluster, model=model, plan=plan_section))


MTNLG_MODEL = yaml.safe_load((REPO / "configs" / "models" / "turing-530b.yaml").read_text()) | {
    "vocab": 50272
}
MTNLG_PLAN = {
    "recompute": "full",
    "attention": "materialized",
    "sequence_parallel": False,
    "zero_stage": 1,
    "overlap": {"tp": False, "dp_grad_reduce": False, "dp_param_gather": False},
}
# DGX A100 servers, seconds per iteration (Smith et al. 2022 §2.4)
MTNLG = [(280, 60.1), (350, 50.2), (420, 44.4)]

NEMOTRON_MODEL = {
    "name": "nemotron-4-340b",
    "layers": 96,
    "hidden": 18432,
    "heads": 96,
    "kv_heads": 8,
    "ffn_hidden": 73728,
    "vocab": 256000,
    "seq_len": 4096,
    "mlp": "gelu",
    "tied_embeddings": False,
    "position": "rope",
    "dropout": False,
    "source": "Nemotron-4 340B (arXiv 2406.11704) §2: 96 layers, hidden 18,432, 96 heads, 8 KV heads, "
    "squared ReLU, 256k vocabulary, sequence 4,096",
}
NEMOTRON_PLAN = {
    "recompute": "selective",
    "attention": "flash",
    "sequence_parallel": True,
    "zero_stage": 1,
    "overlap": {"tp": True, "dp_grad_reduce": True, "dp_param_gather": True},
}
# DP, global batch (sequences), seconds per iteration (Nemotron-4 340B Table 2)
NEMOTRON = [(16, 768, 10.3), (32, 1536, 10.3), (64, 2304, 8.0)]

# GPUs, sequence, (tp, cp, pp, dp), TFLOP/s per GPU in PaLM's convention (Llama 3 Table 4)
LLAMA3 = [
    (8192, 8192, (8, 1, 16, 64), 430.0),
    (16384, 8192, (8, 1, 16, 128), 400.0),
    (16384, 131072, (8, 16, 16, 8), 380.0),
]

BLOOM_MODEL = {
    "name": "bloom-176b",
    "layers": 70,
    "hidden": 14336,
    "heads": 112,
    "kv_heads": 112,
    "ffn_hidden": 57344,
    "vocab": 250880,
    "seq_len": 2048,
    "mlp": "gelu",
    "tied_embeddings": True,
    "position": "learned",
    "dropout": False,
    "source": "BLOOM (arXiv 2211.05100) Table 3: 70 layers, hidden 14,336, 112 heads, vocabulary 250,880",
}


def mtnlg_530b() -> list[ProductionRun]:
    out = []
    for servers, step_s in MTNLG:
        cfg = _megatron_config(
            family="A100",
            fabric=SELENE,
            model=MTNLG_MODEL,
            layout={"tp": 8, "pp": 35, "dp": servers * 8 // 280},
            batch=1920,
            micro_batch=1,
            plan=MTNLG_PLAN,
        )
        out.append(
            ProductionRun(
                "mtnlg530b", f"MT-NLG 530B, {servers * 8} GPUs", cfg, step_s, "arXiv 2201.11990 §2.4"
            )
        )
    return out


def nemotron4_340b() -> list[ProductionRun]:
    out = []
    for dp, batch, step_s in NEMOTRON:
        cfg = _megatron_config(
            family="H100",
            fabric=DGX_H100,
            model=NEMOTRON_MODEL,
            layout={"tp": 8, "pp": 12, "dp": dp, "vpp": 8},
            batch=batch,
            micro_batch=1,
            plan=NEMOTRON_PLAN,
        )
        out.append(
            ProductionRun(
                "nemotron4_340b", f"Nemotron-4 340B, {dp * 96} GPUs", cfg, step_s, "arXiv 2406.11704 Table 2"
            )
        )
    return out


def llama3_405b() -> list[ProductionRun]:
    out = []
    for gpus, seq, (_tp, cp, _pp, dp), tflops in LLAMA3:
        cfg = load_config(
            LLAMA,
            [
                f"cluster.nodes={gpus // 8}",
                f"model.seq_len={seq}",
                f"plan.layout.cp={cp}",
                f"plan.layout.dp={dp}",
                "plan.measured=[]",  # the shipped config is calibrated on the first row: judge the model alone
            ],
        ).config
        tokens = cfg.plan.global_batch_tokens
        step_s = tokens * palm_flops_per_token(cfg.model) / (tflops * 1e12 * gpus)
        out.append(
            ProductionRun(
                "llama3_405b",
                f"Llama 3 405B, {gpus} GPUs, {seq // 1024}K",
                cfg,
                step_s,
                "arXiv 2407.21783 Table 4",
            )
        )
    return out


def bloom_176b() -> list[ProductionRun]:
    cfg = _megatron_config(
        family="A100",
        fabric=JEAN_ZAY,
        model=BLOOM_MODEL,
        layout={"tp": 4, "pp": 12, "dp": 8},
        batch=2048,
        micro_batch=2,
        plan=MTNLG_PLAN,
    )
    flops = narayanan_flops_per_iteration(2048, 2048, 70, 14336, 250880, full_recompute=True)
    return [
        ProductionRun(
            "bloom176b", "BLOOM 176B, 384 GPUs", cfg, flops / (150e12 * 384), "arXiv 2211.05100 §3.4"
        )
    ]


def all_production_runs() -> list[ProductionRun]:
    return mtnlg_530b() + nemotron4_340b() + llama3_405b() + bloom_176b()


# The split: the band is derived from FITTED and judged on HELD_OUT (one family per accelerator and stack kind each).
FITTED = ("mtnlg530b", "llama3_405b")
HELD_OUT = ("nemotron4_340b", "bloom176b")


def with_measured(target: ProductionRun, measured: ProductionRun) -> CampaignConfig:
    """`target`'s config calibrated on `measured` (the same model and stack at another scale): its layout, nodes,
    batch and published step time as one `plan.measured` entry."""
    cfg = measured.config
    entry = {
        "nodes": cfg.cluster.nodes,
        "layout": cfg.plan.layout.model_dump(),
        "global_batch_tokens": cfg.plan.global_batch_tokens,
        "micro_batch": cfg.plan.micro_batch,
        "step_time_s": measured.step_s,
        "source": f"{measured.name} ({measured.source})",
        "model": cfg.model.name,
    }
    if cfg.model.seq_len != target.config.model.seq_len:
        raise ValueError(f"{measured.name} and {target.name} are not the same model (sequence length)")
    data = target.config.model_dump(mode="json", by_alias=True)
    data["plan"]["measured"] = [entry]
    return CampaignConfig.model_validate(data)
