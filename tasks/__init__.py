"""Prefect tasks: read inputs, call one or two `campaign` functions, write outputs atomically, log one line."""
