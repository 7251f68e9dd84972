"""`campaign` imports without Prefect or Great Expectations (DESIGN §2's dependency rule)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BLOCK = """
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('prefect', 'great_expectations'):
            raise ImportError(f'{name} is blocked: campaign must not import it')
sys.meta_path.insert(0, Block())
import campaign
for module in pkgutil.walk_packages(campaign.__path__, 'campaign.'):
    importlib.import_module(module.name)
print('ok')
"""


def test_campaign_imports_without_prefect_or_great_expectations():
    result = subprocess.run([sys.executable, "-c", BLOCK], cwd=REPO, capture_output=True, text=True, check=False,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
