"""`python -m campaign_cli ...`: the `campaign` command."""

import sys

from campaign_cli.cli import main

sys.exit(main())
