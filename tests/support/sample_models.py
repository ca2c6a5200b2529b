"""Small real models for the registry tests: trained here with scikit-learn, converted with skl2onnx."""

from __future__ import annotations

from pathlib import Path

import numpy as np

TRAIN = [
    ("Invoice 1001. Bill to ACME. Amount due 300 EUR. Payment terms 30 days. VAT 21%.", "invoice"),
    ("INVOICE no 77, subtotal 90, VAT 18, total due 108 EUR, bill to Rotterdam Beans", "invoice"),
    ("Please find the invoice attached: amount due by Friday, payment terms net 14.", "invoice"),
    ("Curriculum vitae. Work experience: engineer. Education: physics. Skills: Python.", "resume"),
    ("Resume of a data analyst: education, skills in SQL, work experience at a bank.", "resume"),
    ("CV: skills, education and references available on request; work experience abroad.", "resume"),
    ("Hello support, my order is not working, please help, I want a refund. Ticket 12.", "support"),
    ("Customer service: the grinder broke, ticket opened, please help with a refund.", "support"),
    ("Support request: app not working after update, please help, issue number 77.", "support"),
]
LABELS = ["invoice", "resume", "support"]


def text_pipeline(lowercase: bool = True):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    texts, labels = zip(*TRAIN, strict=True)
    pipe = Pipeline([("tfidf", TfidfVectorizer(lowercase=lowercase)), ("clf", LogisticRegression(C=20, max_iter=500))])
    return pipe.fit(list(texts), list(labels))


def text_onnx(path: Path) -> Path:
    """The text classifier as ONNX: a string tensor [N, 1] in; label and probabilities out.

    No lower-casing: ONNX Runtime's StringNormalizer needs the en_US.UTF-8 locale, which a
    minimal Debian does not generate."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType

    pipe = text_pipeline(lowercase=False)
    model = to_onnx(
        pipe,
        initial_types=[("text", StringTensorType([None, 1]))],
        options={id(pipe.steps[-1][1]): {"zipmap": False}},
        target_opset=17,
    )
    path.write_bytes(model.SerializeToString())
    return path


def numeric_onnx(path: Path) -> Path:
    """A two-feature classifier: class "high" when x + y > 1."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(7)
    x = rng.random((400, 2)).astype(np.float32)
    y = np.where(x.sum(axis=1) > 1, "high", "low")
    clf = LogisticRegression(C=100, max_iter=1000).fit(x, y)
    model = to_onnx(clf, x[:1], options={id(clf): {"zipmap": False}}, target_opset=17)
    path.write_bytes(model.SerializeToString())
    return path


def text_skops(path: Path) -> Path:
    import skops.io as sio

    sio.dump(text_pipeline(), str(path))
    return path


def shout(values):
    """Not on skops' safe list: used to show that unknown types must be trusted by name."""
    return values


def untrusted_skops(path: Path) -> Path:
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    x = np.array([[0.0, 0.0], [1.0, 1.0], [0.1, 0.0], [0.9, 1.0]])
    model = make_pipeline(FunctionTransformer(shout), LogisticRegression()).fit(x, [0, 1, 0, 1])
    sio.dump(model, str(path))
    return path


class LengthModel:
    """An entry point as a class: a label per text by its length."""

    def predict(self, inputs):
        return [{"label": "long" if len(t) > 20 else "short", "score": float(len(t)), "chars": len(t)} for t in inputs]
