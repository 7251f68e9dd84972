"""Frozen reference implementations and published data the tests hold the project to. Do not edit to make a test pass."""
