"""One Prefect flow per stage (prepare, validate, commit, execute, analyse), the lifecycle flow, and the CLI."""
