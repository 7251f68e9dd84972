"""Training logs as measurements: each log below is written by the test from its framework's own format strings
(cited at each writer), and `campaign plan measure` reads it as a plan.measured entry."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml

from campaign.errors import DataError
from campaign.plan.measure import parse_layout, read_step_times
from campaign.plan.measured_entry import measured_entry
from campaign_cli.cli import main
from tests.helpers.paths import DEMO

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def megatron_args(seq_len: int = 4096, tp: int = 2, pp: int = 1, dp: int = 8, gbs: int = 256) -> list[str]:
    """Megatron-LM's `_print_args` (megatron/training/arguments.py): a title, `'  {} {} {}'.format(arg, dots, value)`
    with dots = '.' * (48 - len(arg)), sorted, and an end line."""
    values = {
        "context_parallel_size": 1,
        "data_parallel_size": dp,
        "global_batch_size": gbs,
        "pipeline_model_parallel_size": pp,
        "seq_length": seq_len,
        "tensor_model_parallel_size": tp,
        "virtual_pipeline_model_parallel_size": None,
        "world_size": tp * pp * dp,
    }
    lines = ["------------------------ arguments ------------------------"]
    lines += sorted("  {} {} {}".format(k, "." * (48 - len(k)), v) for k, v in values.items())
    lines.append("-------------------- end of arguments ---------------------")
    return lines


def megatron_line(
    iteration: int,
    train_iters: int,
    seconds: float,
    gbs: int,
    skipped: int = 0,
    nans: int = 0,
    when: datetime = T0,
) -> str:
    """One line of Megatron-LM's `training_log` (megatron/training/training.py), built with its format strings."""
    log_string = f" [{when.strftime('%Y-%m-%d %H:%M:%S.%f')}]"
    log_string += f" iteration {iteration:8d}/{train_iters:8d} |"
    log_string += f" consumed samples: {iteration * gbs:12d} |"
    log_string += f" elapsed time per iteration (ms): {seconds * 1000.0:.1f} |"
    log_string += f" throughput per GPU (TFLOP/s/GPU): {402.5:.1f} |"
    log_string += f" learning rate: {3e-4:.6E} |"
    log_string += f" global batch size: {gbs:5d} |"
    log_string += " {}: {:.6E} |".format("lm loss", 2.5)
    log_string += f" loss scale: {1.0:.1f} |"
    log_string += f" grad norm: {0.9:.3f} |"
    log_string += f" number of skipped iterations: {skipped:3d} |"
    log_string += f" number of nan iterations: {nans:3d} |"
    return log_string


def known_times(n: int = 100, seed: int = 3) -> np.ndarray:
    """Warm-up (compilation, allocator growth) then steady steps, at Megatron's printed 0.1 ms resolution."""
    steady = 4.0 + np.random.default_rng(seed).normal(0, 0.05, n)
    steady[:3] = [21.0, 9.5, 6.2]
    return np.round(steady * 10_000) / 10_000


def write_megatron(path: Path, times: np.ndarray, gbs: int = 256, args: bool = True, **marks: int) -> Path:
    lines = megatron_args(gbs=gbs) if args else []
    lines += ["> building train, validation, and test datasets ..."]
    for i, t in enumerate(times, start=1):
        lines.append(
            megatron_line(
                i, len(times), float(t), gbs, skipped=marks.get(f"skip{i}", 0), nans=marks.get(f"nan{i}", 0)
            )
        )
        if i % 50 == 0:
            lines.append(f" validation loss at iteration {i} | lm loss value: 2.4E+00 | lm loss PPL: 11.0 |")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_megatron_log_of_100_iterations_gives_their_median_after_warm_up_and_its_tokens(
    tmp_path: Path,
) -> None:
    times = known_times()
    path = write_megatron(tmp_path / "train.log", times)
    got = measured_entry(path, nodes=2, layout=None)
    assert got.format == "megatron"
    # Warm-up as documented: the first 10 % of the samples (10 of 100) are dropped.
    assert got.result.skipped == 10 and got.result.n_steps == 90
    assert got.result.median_s == pytest.approx(float(np.median(times[10:])), abs=1e-9)
    # Tokens per step: the log's global batch size (sequences) x the log's seq_length.
    assert got.global_batch_tokens == 256 * 4096 and "seq_length" in got.tokens_source
    assert got.layout == {"tp": 2, "pp": 1, "dp": 8, "cp": 1, "vpp": 1}  # the log's own parallel sizes
    entry = got.entry()
    assert entry is not None and entry["step_time_s"] == got.result.median_s


def test_a_megatron_log_without_its_arguments_takes_the_models_sequence_length(tmp_path: Path) -> None:
    path = write_megatron(tmp_path / "train.log", known_times(), gbs=128, args=False)
    with pytest.raises(DataError, match="global batch size 128") as err:
        measured_entry(path, nodes=2, layout=parse_layout("tp=2,dp=8"))
    assert "--seq-len" in str(err.value.fix)
    got = measured_entry(path, nodes=2, layout=parse_layout("tp=2,dp=8"), seq_len=8192)
    assert got.global_batch_tokens == 128 * 8192 and "--seq-len" in got.tokens_source


def test_skipped_and_nan_iterations_are_left_out_and_named(tmp_path: Path) -> None:
    times = known_times()
    times[40] = times[60] = 30.0  # an overflowing step and a NaN step, as slow as a checkpoint
    path = write_megatron(tmp_path / "train.log", times, skip41=1, nan61=1)
    got = read_step_times(path)
    assert 41 not in got.steps and 61 not in got.steps and len(got.steps) == 88
    assert any("1 skipped iteration" in n for n in got.notes) and any(
        "1 NaN iteration" in n for n in got.notes
    )
    assert max(got.seconds) < 5.0


def test_a_restart_inside_the_log_is_named_and_its_warm_up_dropped(tmp_path: Path) -> None:
    first, second = known_times(60, seed=1), known_times(60, seed=2)
    path = tmp_path / "train.log"
    lines = megatron_args()
    lines += [megatron_line(i, 100, float(t), 256) for i, t in enumerate(first, start=1)]
    # The job died after iteration 60 and restarted from the checkpoint at iteration 40.
    lines += [megatron_line(40 + i, 100, float(t), 256) for i, t in enumerate(second, start=1)]
    path.write_text("\n".join(lines) + "\n")
    got = read_step_times(path)
    assert any("went back from 60 to 41" in n for n in got.notes)
    assert got.skipped == 12 and max(got.seconds) < 5.0  # 6 warm-up samples at each start, the restart's too


def test_torchtitan_step_lines_give_seconds_from_tokens_per_second_per_gpu(tmp_path: Path) -> None:
    # TorchTitan's MetricsProcessor.log (torchtitan/components/metrics.py): tps = tokens since the last line /
    # (seconds x non-data-parallel size) per device; its logger prefixes "[titan] %(asctime)s - %(name)s -
    # %(levelname)s - " (torchtitan/tools/logging.py) and colours each field (torchtitan/tools/utils.py Color).
    red, green, orange, turquoise, blue, cyan, magenta = (
        "\033[31m",
        "\033[32m",
        "\033[38;2;180;60;0m",
        "\033[38;2;54;234;195m",
        "\033[34m",
        "\033[36m",
        "\033[35m",
    )
    reset = "\033[39m"
    gbt, gpus, times = 8 * 4 * 8192, 32, known_times(40)
    lines = []
    for step, t in enumerate(times, start=1):
        tps = gbt / (float(t) * gpus)
        when = (T0 + timedelta(seconds=float(times[:step].sum()))).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        lines.append(
            f"[titan] {when} - root - INFO - "
            f"{red}step: {step:2}  "
            f"{green}loss: {2.5:8.5f}  "
            f"{orange}grad_norm: {0.8:7.4f}  "
            f"{turquoise}memory: {61.2:5.2f}GiB"
            f"({77.1:.2f}%)  "
            f"{blue}tps: {round(tps):,}  "
            f"{cyan}tflops: {390.1:,.2f}  "
            f"{magenta}mfu: {39.44:.2f}%{reset}"
        )
    path = tmp_path / "titan.log"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="tps") as err:
        measured_entry(path, nodes=4, layout=None)
    assert "--global-batch-tokens" in str(err.value.fix)
    got = measured_entry(path, nodes=4, layout=parse_layout("dp=32"), global_batch_tokens=gbt)
    assert got.format == "torchtitan" and got.tokens_source == "--global-batch-tokens"
    # tps is printed rounded to a whole token per second: about 1 in 2,000 here
    assert got.result.median_s == pytest.approx(float(np.median(times[4:])), rel=1e-3)


def test_a_nemo_metrics_csv_is_read_with_its_batch_from_consumed_samples(tmp_path: Path) -> None:
    # NeMo's TimingCallback (nemo/utils/exp_manager.py) logs name + " in s" per training batch; Lightning's CSV
    # logger writes one row per logging step with every key seen as a column and "step" added.
    times = known_times(50)
    header = [
        "consumed_samples",
        "epoch",
        "global_step",
        "lr",
        "reduced_train_loss",
        "step",
        "train_step_timing in s",
    ]
    rows = [",".join(header)]
    for step, t in enumerate(times):
        rows.append(f"{(step + 1) * 512}.0,0,{step}.0,0.0003,2.5,{step},{t}")
        if step == 25:
            rows.append(",0,,,,25,")  # a validation row: no step timing
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    got = measured_entry(path, nodes=8, layout=parse_layout("tp=4,pp=2,dp=8"), seq_len=4096)
    assert got.format == "nemo" and got.global_batch_tokens == 512 * 4096
    assert got.result.median_s == pytest.approx(float(np.median(times[5:])), abs=1e-9)


def test_the_entry_is_refused_where_the_config_would_refuse_it(tmp_path: Path) -> None:
    path = write_megatron(tmp_path / "train.log", known_times())
    with pytest.raises(DataError, match="contradicts the log's own arguments"):
        measured_entry(path, nodes=16, layout=parse_layout("tp=8,pp=4,dp=4"))
    with pytest.raises(DataError, match="contradicts the log"):
        measured_entry(path, nodes=2, layout=None, global_batch_tokens=7)
    bare = write_megatron(tmp_path / "bare.log", known_times(), args=False)
    with pytest.raises(DataError, match="128 GPUs, but 1 nodes"):
        measured_entry(bare, nodes=1, layout=parse_layout("tp=8,pp=4,dp=4"), global_batch_tokens=256 * 4096)
    with pytest.raises(DataError, match="tp is given twice"):
        parse_layout("tp=2,tp=4")
    huge = tmp_path / "huge.jsonl"
    huge.write_text(
        "".join(json.dumps({"step": k, "step_time_s": 1e300, "tokens": 4096}) + "\n" for k in range(20))
    )
    with pytest.raises(DataError, match="step_time_s"):
        measured_entry(huge, nodes=1, layout=parse_layout("dp=8"))
    small = tmp_path / "small.jsonl"
    small.write_text(
        "".join(json.dumps({"step": k, "step_time_s": 2.0, "tokens": 7}) + "\n" for k in range(20))
    )
    with pytest.raises(DataError, match="dp = 8"):
        measured_entry(small, nodes=1, layout=parse_layout("dp=8"))


def test_the_command_prints_the_entry_and_nothing_for_a_refused_one(tmp_path: Path, capsys) -> None:
    path = write_megatron(tmp_path / "train.log", known_times())
    assert main(["plan", "measure", str(path), "--nodes", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["step_time_s"] == out["measured"]["step_time_s"] and out["global_batch_tokens"] == 256 * 4096
    assert main(["plan", "measure", str(path), "--nodes", "2"]) == 0
    text = capsys.readouterr().out
    assert "as megatron" in text
    entry = yaml.safe_load("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    assert entry["plan"]["measured"][0]["global_batch_tokens"] == 256 * 4096
    assert main(["plan", "measure", str(path), "--nodes", "1", "--layout", "tp=2,pp=1,dp=8"]) == 2
    refused = capsys.readouterr()
    assert "plan:" not in refused.out and "16 GPUs, but 1 nodes" in refused.err


def test_a_file_that_is_no_training_log_says_which_ones_are_read(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n")
    with pytest.raises(DataError, match="Megatron-LM"):
        read_step_times(path)
    assert DEMO.exists()


def test_with_a_config_the_entry_takes_its_sequence_length_model_and_stack_and_pastes_into_it(
    tmp_path: Path,
) -> None:
    # A 2-node run of the demo model (seq_len 4096), tp=2, dp=8, global batch 256 sequences.
    path = write_megatron(tmp_path / "train.log", known_times(), gbs=256, args=False)
    got = measured_entry(path, nodes=2, layout=parse_layout("tp=2,dp=8"), config=DEMO)
    entry = got.entry()
    assert entry is not None and entry["global_batch_tokens"] == 256 * 4096
    assert entry["model"] == "demo-2b" and entry["stack"] == "megatron-core"
    assert "model.seq_len" in got.tokens_source
    # A batch the config's micro-batch and dp cannot split is refused, naming the config's rule.
    odd = write_megatron(tmp_path / "odd.log", known_times(), gbs=17, args=False)
    with pytest.raises(DataError, match="the config refuses this entry"):
        measured_entry(odd, nodes=2, layout=parse_layout("tp=2,dp=8"), config=DEMO)


def test_a_megatron_log_with_a_restart_is_a_measured_run_for_analyse(tmp_path: Path) -> None:
    """Megatron-LM's lines carry their own time; checkpoint lines are checkpointing.py's save_checkpoint message."""
    from campaign.execution.external import external_report_inputs

    lines = megatron_args(seq_len=4096, gbs=8)
    t = T0
    for i in range(1, 9):
        t += timedelta(seconds=2)
        lines.append(megatron_line(i, 20, 2.0, 8, when=t))
        if i == 5:
            lines.append(
                f"  [{t.strftime('%Y-%m-%d %H:%M:%S.%f')}] successfully saved checkpoint from iteration {5:7d} to "
                "/ckpt [ t 1/2, gtp_remat 1/1, p 1/1 ]"
            )
    t += timedelta(seconds=30)  # died after iteration 8, restarted from the checkpoint at 5
    for i in range(6, 11):
        t += timedelta(seconds=2)
        lines.append(megatron_line(i, 20, 2.0, 8, when=t))
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    r = external_report_inputs(path, None, gpu_hour_usd=2.0).result.to_json()
    assert r["measured"]["final_step"] == 10 and r["measured"]["steps_trained_again"] == 3
    assert r["tokens_trained"] == 10 * 8 * 4096 and r["interruptions"]["by_category"] == {"unclassified": 1}
    # versions of training.py that print strftime('%Y-%m-%d %H:%M:%S'), whole seconds: the same run
    whole = tmp_path / "whole-seconds.log"
    whole.write_text("\n".join(re.sub(r"(\d\d:\d\d:\d\d)\.\d{6}\]", r"\1]", line) for line in lines) + "\n")
    assert "[2026-03-01 08:00:02]" in whole.read_text()
    again = external_report_inputs(whole, None, gpu_hour_usd=2.0).result.to_json()
    assert again["measured"]["final_step"] == 10 and again["measured"]["steps_trained_again"] == 3
    bare = tmp_path / "bare.log"
    bare.write_text("\n".join(line.split("] ", 1)[1] for line in lines if "] iteration" in line) + "\n")
    with pytest.raises(DataError, match="no timestamp"):
        external_report_inputs(bare, None, gpu_hour_usd=2.0)


def test_a_garbled_number_in_a_log_line_is_named_with_its_line(tmp_path: Path) -> None:
    path = write_megatron(tmp_path / "train.log", known_times())
    lines = path.read_text().splitlines()
    lines[20] = lines[20].replace("number of nan iterations:   0", "number of nan iterations: x")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"train\.log:21: number of nan iterations is 'x'"):
        read_step_times(path)
    nemo = tmp_path / "metrics.csv"
    nemo.write_text("step,train_step_timing in s\n1,2.0\nseven,2.0\n")
    with pytest.raises(DataError, match=r"metrics\.csv:3: step is 'seven'"):
        read_step_times(nemo)
