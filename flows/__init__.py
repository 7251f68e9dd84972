"""One Prefect flow per stage (prepare, validate, commit, execute, analyse), the lifecycle flow and their helpers.

The `campaign` command that runs them from a terminal lives a layer above, in `campaign_cli`."""
