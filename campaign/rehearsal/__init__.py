"""The rehearsal gate: a real training loop on a sample of the prepared data, killed and restored for real.

`gate.run_rehearsal` builds the sample (`sample`), writes it as the trainer contract's `.npy` files
(`contract`), runs the trainer through the harness (`harness`, `processes`) and returns its verdict
(`verdict`, plotted by `plot`). The reference trainer is `python -m campaign.rehearsal.trainer` (JAX and optax,
`transformer`). This package's `__init__` imports nothing, so the trainer's process starts light.
"""
