"""Sample data and the demo: what `shoal demo`, the tests and the benchmarks run.

- `corpus`: documents with known content (PDF, Office, e-mail, HTML, ...).
- `media`: images, speech and video with known content, and the WER/CER scores.
- `sales`: the sales-and-marketing refresh pipeline (recipes, a job, a state machine).
- `demo`: `shoal demo` end to end.

Nothing in the library imports this package: it sits beside the CLI and the web console.
"""
