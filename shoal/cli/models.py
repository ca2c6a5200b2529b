"""`shoal model register|list|show|predict`: the custom model registry."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli import output
from shoal.cli.context import JsonOpt, out, settings

model_app = typer.Typer(help="Custom models: register versions, list them, predict with them.", no_args_is_help=True)


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@model_app.command("register")
def register_cmd(
    name: Annotated[str, typer.Argument(help="Model name (lower case, digits, _).")],
    source: Annotated[
        str, typer.Argument(help="A .onnx or .skops file, a spaCy pipeline folder or package, or module:attr.")
    ],
    kind: Annotated[
        str | None, typer.Option("--kind", help="onnx | sklearn | spacy | entrypoint (default: from SOURCE).")
    ] = None,
    version: Annotated[str | None, typer.Option("--version", help="Version (default: the next number).")] = None,
    description: Annotated[str, typer.Option("--description", help="What the model does.")] = "",
    labels: Annotated[
        str | None, typer.Option("--labels", help="Comma-separated class names, in the model's score order (ONNX).")
    ] = None,
    trust: Annotated[
        list[str] | None, typer.Option("--trust", help="A type the skops file may load beyond skops' safe list.")
    ] = None,
    _json: JsonOpt = False,
) -> None:
    """Register a model version: its file is copied into the warehouse and hashed."""
    from shoal.models import register_model

    record, new = register_model(
        settings(),
        name,
        source,
        kind=kind,
        version=version,
        description=description,
        labels=_split(labels),
        trust=trust or [],
    )

    def as_text() -> None:
        verb = "Registered" if new else "Already registered (same content):"
        output.out.print(f"{verb} {output.escape(record.ref)} ({record.kind}, sha256 {record.sha256[:12]})")

    out().show({**record.to_dict(), "new": new}, as_text)


@model_app.command("list")
def list_cmd(
    name: Annotated[str | None, typer.Argument(help="Only this model's versions.")] = None,
    _json: JsonOpt = False,
) -> None:
    """Every registered model version, oldest first."""
    from shoal.models import list_models

    found = list_models(settings(), name)
    out().table(
        "Models",
        ["name", "version", "kind", "labels", "sha256", "registered", "by", "description"],
        [
            [
                m.name,
                m.version,
                m.kind,
                ",".join(m.info.get("labels") or []),
                m.sha256[:12],
                m.registered_at,
                m.registered_by,
                m.description,
            ]
            for m in found
        ],
        [m.to_dict() for m in found],
    )


@model_app.command("show")
def show_cmd(
    ref: Annotated[str, typer.Argument(help="NAME (newest version) or NAME@VERSION.")],
    _json: JsonOpt = False,
) -> None:
    """One model version's record: file, hash, inputs, outputs, labels."""
    from shoal.models import get_model

    record = get_model(settings(), ref)

    def as_text() -> None:
        output.print_kv(f"Model {record.ref}", {k: v for k, v in record.to_dict().items() if k != "info"} | record.info)

    out().show(record.to_dict(), as_text)


@model_app.command("predict")
def predict_cmd(
    ref: Annotated[str, typer.Argument(help="NAME (newest version) or NAME@VERSION.")],
    text: Annotated[list[str] | None, typer.Option("--text", help="Predict for this text (repeatable).")] = None,
    table: Annotated[str | None, typer.Option("--table", help="Score every row of NS.TABLE on Spark.")] = None,
    columns: Annotated[str | None, typer.Option("--columns", help="Input column(s), comma-separated.")] = None,
    keep: Annotated[str | None, typer.Option("--keep", help="Key column(s) copied to the output.")] = None,
    into: Annotated[str | None, typer.Option("--into", help="Output table NS.TABLE (replaced).")] = None,
    _json: JsonOpt = False,
) -> None:
    """Predict for given texts, or score a table into another table with the model version recorded."""
    from shoal.exceptions import ShoalError
    from shoal.models import get_model, load_predictor

    s = settings()
    record = get_model(s, ref)
    if text:
        preds = load_predictor(record).predict(list(text))
        rows = [{"text": t, **p.to_dict(), "model": record.ref} for t, p in zip(text, preds, strict=True)]
        out().table(
            f"Predictions of {record.ref}",
            ["text", "label", "score"],
            [[r["text"][:60], r["label"], r["score"]] for r in rows],
            rows,
        )
        return
    if not (table and columns and into):
        raise ShoalError("give --text, or --table, --columns and --into", hint="shoal model predict --help")
    from shoal.models.score import predict_table
    from shoal.spark import get_spark

    with out().progress(f"predict {record.ref}"):
        result = predict_table(get_spark(s), record, table, _split(columns), into, keep=_split(keep))

    def as_text() -> None:
        output.print_kv(f"Scored {table} with {record.ref}", result)

    out().show(result, as_text)
