"""Code the tests share. Test modules import from here, never from one another (tests/test_layout.py)."""
