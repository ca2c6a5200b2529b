"""Kept for imports written before the workflow interpreter was renamed: use `shoal.workflows.interpreter`.

"Engine" in Shoal means the warm engine (`shoal engine`, `shoal.cli.warm`); the state machine
interpreter lives in `shoal.workflows.interpreter`.
"""

from shoal.workflows.interpreter import new_execution_id

__all__ = ["new_execution_id"]
