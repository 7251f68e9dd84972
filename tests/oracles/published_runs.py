"""Published training runs the plan model is calibrated and checked against (shared/reference/perf-model.md §3).

Each row is a plain campaign config built from the publication's model, layout and batch, the accelerator file of
its family (configs/accelerators/) and the fabric of the machine it ran on, plus the figure it published in the
publication's own metric:
* Megatron-LM 2021 (Narayanan et al., SC'21, A100 Selene): TFLOP/s per GPU / 312 with the 96 B s l h^2 (1 + s/6h +
  V/16lh) FLOPs of full recompute ("% of theoretical peak");
* Megatron-Core 2024 (README model table, H100): TFLOP/s per GPU / 989 with the 2024 `num_floating_point_operations`
  (non-causal attention) = MFU;
* Korthikanti et al. 2022 Table 5 (A100 Selene, DP = 1): iteration seconds, turned into MFU with the paper's 72 B s
  l h^2 (1 + s/6h + V/12lh) model FLOPs. Out of sample: the calibration never sees it.
Settings the publications state are used as stated (attention kernel, sequence parallelism, recompute, overlap);
settings they do not state are assumptions named in ASSUMPTIONS, the same for every row of a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from campaign.config import CampaignConfig, load_config
from campaign.plan.flops import megatron_core_2024_flops_per_iteration, narayanan_flops_per_iteration

REPO = Path(__file__).resolve().parents[2]
ACCELERATORS = REPO / "configs" / "accelerators"
DEMO = REPO / "configs" / "campaigns" / "demo.yaml"

# Fabrics: SimAI's effective busbw (calbusbw.cc) per GPU; one NIC per GPU (DGX A100: 8 x HDR 200 Gb/s; DGX H100:
# 8 x NDR 400 Gb/s); the reference runs are small enough for one non-blocking fabric.
SELENE = {
    "nvlink_domain_gpus": 8,
    "nvlink_gb_per_s": 240.0,
    "nic_gb_per_s": 23.5,
    "pod_gpus": 8192,
    "oversubscription": 1,
    "source": "DGX A100 SuperPOD (Selene): NVSwitch, 8 x HDR IB per node; SimAI busbw",
}
DGX_H100 = {
    "nvlink_domain_gpus": 8,
    "nvlink_gb_per_s": 370.8,
    "nic_gb_per_s": 48.5,
    "pod_gpus": 8192,
    "oversubscription": 1,
    "source": "DGX H100: NVLink4 NVSwitch, 8 x NDR IB per node; SimAI busbw",
}

ASSUMPTIONS = {
    "megatron2021": "micro-batch 1, no interleaving (the table does not give them); 2021 Megatron: no distributed "
    "optimizer, no sequence parallelism, materialized attention, no overlap",
    "mcore2024": "micro-batch 1, no interleaving, selective recompute, no dropout, GeLU 4h MLP, untied embeddings "
    "(the table gives none of them); flash attention, sequence parallel, distributed optimizer and "
    "TP/DP overlap as the README states",
    "korthikanti2022": "Calculon's validation configs: micro-batch 4 for 22B, 1 otherwise; interleaving 3 for 175B "
    "and 530B; full-recompute rows without sequence parallelism",
}


@dataclass(frozen=True)
class PublishedRun:
    table: str  # megatron2021 | mcore2024 | korthikanti2022
    name: str
    family: str  # A100 | H100
    config: CampaignConfig
    published: float  # the publication's metric, as a fraction
    flops_per_iteration: float  # the publication's FLOPs per iteration, for its metric

    @property
    def gpus(self) -> int:
        return self.config.plan.layout.world

    @property
    def peak_flops(self) -> float:
        return self.config.cluster.accelerator.peak_bf16_tflops * 1e12

    def metric(self, step_s: float) -> float:
        """A step time in the publication's metric (fraction of peak with its FLOP convention)."""
        return self.flops_per_iteration / (step_s * self.gpus * self.peak_flops)

    def step_s(self) -> float:
        """The published figure as an iteration time."""
        return self.flops_per_iteration / (self.published * self.gpus * self.peak_flops)


def accelerator(family: str, kernels: dict | None = None) -> dict:
    """The accelerator file of a family, with its calibration replaced by `kernels` if given."""
    name = {"A100": "a100-sxm-80gb.yaml", "H100": "h100-sxm-80gb.yaml"}[family]
    data = yaml.safe_load((ACCELERATORS / name).read_text())
    if kernels:
        data["kernels"] = dict(data["kernels"], **kernels)
    return data


def _config(
    *,
    family: str,
    fabric: dict,
    h: int,
    layers: int,
    heads: int,
    tp: int,
    pp: int,
    dp: int,
    batch: int,
    seq: int,
    vocab: int,
    micro_batch: int = 1,
    vpp: int = 1,
    recompute: str,
    attention: str,
    sequence_parallel: bool,
    zero_stage: int,
    overlap: dict,
    mlp: str = "gelu",
    tied: bool,
    position: str,
    dropout: bool,
    kernels: dict | None = None,
) -> CampaignConfig:
    base = load_config(DEMO).config.model_dump(mode="json", by_alias=True)
    gpus = tp * pp * dp
    cluster = dict(
        base["cluster"],
        name=f"{family}-reference",
        nodes=max(1, gpus // 8),
        gpus_per_node=min(8, gpus),
        accelerator=accelerator(family, kernels),
        network=fabric,
    )
    model = {
        "name": f"gpt-h{h}",
        "layers": layers,
        "hidden": h,
        "heads": heads,
        "kv_heads": heads,
        "ffn_hidden": 4 * h,
        "vocab": vocab,
        "seq_len": seq,
        "mlp": mlp,
        "tied_embeddings": tied,
        "position": position,
        "dropout": dropout,
    }
    plan = dict(
        {
            k: v for k, v in base["plan"].items() if k != "measured"
        },  # the demo's measured run is not this model's
        layout={"tp": tp, "pp": pp, "dp": dp, "cp": 1, "vpp": vpp},
        micro_batch=micro_batch,
        global_batch_tokens=batch * seq,
        recompute=recompute,
        attention=attention,
        sequence_parallel=sequence_parallel,
        zero_stage=zero_stage,
        overlap=overlap,
    )
    return CampaignConfig.model_validate(dict(base, cluster=cluster, model=model, plan=plan))


# h, l, heads, TP, PP, DP, B, TFLOP/s per GPU (Narayanan et al. 2021, weak scaling, A100-80GB, s 2048, V 51,200)
MEGATRON_2021 = [
    ("1.7B", 2304, 24, 24, 1, 1, 32, 512, 137),
    ("3.6B", 3072, 30, 32, 2, 1, 32, 512, 138),
    ("7.5B", 4096, 36, 32, 4, 1, 32, 512, 142),
    ("18B", 6144, 40, 48, 8, 1, 32, 1024, 135),
    ("39B", 8192, 48, 64, 8, 2, 32, 1536, 138),
    ("76B", 10240, 60, 80, 8, 4, 32, 1792, 140),
    ("145B", 12288, 80, 96, 8, 8, 24, 2304, 148),
    ("310B", 16384, 96, 128, 8, 16, 15, 2160, 155),
    ("530B", 20480, 105, 128, 8, 35, 9, 2520, 163),
    ("1T", 25600, 128, 160, 8, 64, 6, 3072, 163),
]
# heads, h, l, TP, PP, DP, B, TFLOP/s per GPU (Megatron-Core README 2024, H100, s 4096, V 131,072)
MCORE_2024 = [
    ("1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8),
    ("7.1B", 32, 4096, 30, 2, 1, 48, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 48, 192, 489.1),
    ("32B", 56, 7168, 48, 8, 1, 48, 192, 459.6),
    ("70B", 64, 8192, 84, 8, 2, 48, 384, 419.7),
    ("119B", 80, 10240, 92, 8, 4, 48, 768, 420.5),
    ("177B", 96, 12288, 96, 8, 6, 48, 1152, 432.8),
    ("314B", 128, 16384, 96, 8, 8, 48, 1536, 474.4),
    ("462B", 144, 18432, 112, 8, 16, 48, 3072, 459.9),
]
# h, l, heads, TP, PP, vpp, B, micro-batch, full-recompute s, SP + selective s (Korthikanti 2022 Table 5, DP = 1)
KORTHIKANTI_T5 = [
    ("22B", 6144, 48, 64, 8, 1, 1, 4, 4, 1.42, 1.10),
    ("175B", 12288, 96, 96, 8, 8, 3, 64, 1, 18.13, 13.75),
    ("530B", 20480, 105, 128, 8, 35, 3, 280, 1, 49.05, 37.83),
    ("1T", 25600, 128, 160, 8, 64, 1, 512, 1, 94.42, 71.49),
]

NO_OVERLAP = {"tp": False, "dp_grad_reduce": False, "dp_param_gather": False}
FULL_OVERLAP = {"tp": True, "dp_grad_reduce": True, "dp_param_gather": True}


def megatron_2021(kernels: dict | None = None) -> list[PublishedRun]:
    out = []
    for name, h, l, a, tp, pp, dp, batch, tflops in MEGATRON_2021:
        cfg = _config(
            family="A100",
            fabric=SELENE,
            h=h,
            layers=l,
            heads=a,
            tp=tp,
            pp=pp,
            dp=dp,
            batch=batch,
            seq=2048,
            vocab=51200,
            recompute="full",
            attention="materialized",
            sequence_parallel=False,
            zero_stage=0,
            overlap=NO_OVERLAP,
            tied=True,
            position="learned",
            dropout=True,
            kernels=kernels,
        )
        out.append(
            PublishedRun(
                "megatron2021",
                name,
                "A100",
                cfg,
                tflops / 312.0,
                narayanan_flops_per_iteration(batch, 2048, l, h, 51200, full_recompute=True),
            )
        )
    return out


def mcore_2024(kernels: dict | None = None) -> list[PublishedRun]:
    out = []
    for name, a, h, l, tp, pp, dp, batch, tflops in MCORE_2024:
        cfg = _config(
            family="H100",
            fabric=DGX_H100,
            h=h,
            layers=l,
            heads=a,
            tp=tp,
            pp=pp,
            dp=dp,
            batch=batch,
            seq=4096,
            vocab=131072,
            recompute="selective",
            attention="flash",
            sequence_parallel=True,
            zero_stage=1,
            overlap=FULL_OVERLAP,
            tied=False,
            position="rope",
            dropout=False,
            kernels=kernels,
        )
        out.append(
            PublishedRun(
                "mcore2024",
                name,
                "H100",
                cfg,
                tflops / 989.0,
                megatron_core_2024_flops_per_iteration(cfg.model, batch),
            )
        )
    return out


def korthikanti_2022(kernels: dict | None = None) -> list[PublishedRun]:
    out = []
    for name, h, l, a, tp, pp, vpp, batch, mb, full_s, sel_s in KORTHIKANTI_T5:
        for mode, seconds in (("full", full_s), ("selective", sel_s)):
            cfg = _config(
                family="A100",
                fabric=SELENE,
                h=h,
                layers=l,
                heads=a,
                tp=tp,
                pp=pp,
                dp=1,
                batch=batch,
                seq=2048,
                vocab=51200,
                micro_batch=mb,
                vpp=vpp,
                recompute=mode,
                attention="materialized",
                sequence_parallel=mode == "selective",
                zero_stage=1,
                overlap=NO_OVERLAP,
                tied=True,
                position="learned",
                dropout=True,
                kernels=kernels,
            )
            flops = narayanan_flops_per_iteration(batch, 2048, l, h, 51200, full_recompute=False)
            out.append(
                PublishedRun(
                    "korthikanti2022",
                    f"{name} {mode}",
                    "A100",
                    cfg,
                    flops / (seconds * tp * pp * 312e12),
                    flops,
                )
            )
    return out


def all_runs(a100: dict | None = None, h100: dict | None = None) -> list[PublishedRun]:
    return megatron_2021(a100) + mcore_2024(h100) + korthikanti_2022(a100)
