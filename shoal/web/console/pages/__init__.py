"""Console pages, one module per area; each adds its routes with `add(router, console)`."""
