"""The `campaign` command's subcommands, one module per command group; each registers itself on `app.app`."""
