"""Bridges to the tools researchers already use: an inspect_ai task (`inspect_task`), result
exports for the Hub and Every Eval Ever (`exports`), a `datasets`-loadable copy of the
benchmark (`hf_dataset`) and MLflow tracking (`mlflow_tracking`).

The third-party packages (the `integrations` extra) are imported only inside the modules that
use them: nothing here is needed by the workflow's default run.
"""
