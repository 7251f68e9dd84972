"""The real Slurm cluster the Slurm e2e modules share: one per module (module scope), stopped at its end."""

import os

import pytest

from tests.helpers.slurm_cluster import start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running, reason = start_cluster(tmp_path_factory.mktemp("slurm"))
    if running is None:
        pytest.skip(reason)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(running.conf)
    yield running
    running.stop()
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old
