"""The HTTP API's routers, one module per resource; `shoal.web.api.create_app` includes them."""
