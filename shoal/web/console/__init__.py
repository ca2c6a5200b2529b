"""The web console: server-rendered pages over the same governed services as the API.

`mount(app, settings)` adds the pages to the API's FastAPI app. Every page runs as the
signed-in principal (sessions in `sessions.py`), so catalog listings, SQL results, search
hits, object results and dashboards show exactly what that principal's grants allow.
Templates autoescape everything; text that came from documents is never marked safe, and
the pages load scripts only from the console's own origin (vendored Vega, `console.js`).
"""

from shoal.web.console.routes import mount

__all__ = ["mount"]
