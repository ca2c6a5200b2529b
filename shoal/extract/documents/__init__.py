"""Document extractors, one module per family of formats."""
