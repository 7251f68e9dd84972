"""The `campaign` command (`cli`), the terminal runner it shares with each flow's `python -m flows.<stage>`
(`terminal`), and the private local Prefect API a command starts when no PREFECT_API_URL is set (`local_api`,
`private_api_app`). The outermost layer: campaign_cli -> flows -> tasks -> campaign."""
