"""Great Expectations data gates: suites built from the campaign config, and the runner that checks them."""
