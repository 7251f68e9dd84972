"""Hypothesis profiles. `full` (`make test`, the default) runs each property on the number of examples written on
it; `fast` (`make test-fast`, CAMPAIGN_HYPOTHESIS=fast) on a quarter of them, at least 10. The properties, their
strategies and their explicit @example cases are the same in both."""

import os

from hypothesis import settings

PROFILE = os.environ.get("CAMPAIGN_HYPOTHESIS", "full")
settings.register_profile("full")
settings.register_profile("fast", max_examples=25)
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """`n` examples in the full profile, a quarter of them (at least 10) in the fast one."""
    return n if PROFILE == "full" else max(10, n // 4)
