#!/usr/bin/env python3
"""Builds the digits classifier and data set that netdiv ships for accuracy runs.

Trains a small multi-layer perceptron on scikit-learn's bundled 8x8 digits
data (no download: the data ships in the scikit-learn wheel), writes it as
an ONNX graph, and writes the held-out test images as one .npy file per
sample with their labels. Everything is deterministic for a given
scikit-learn version, and the outputs are committed, so nothing here runs
at test time. Re-run it with:

    python3 -m venv /tmp/digits-venv
    /tmp/digits-venv/bin/pip install scikit-learn onnx onnxruntime
    /tmp/digits-venv/bin/python tests/data/digits/make_digits.py

Files written next to this script:
- digits_mlp.onnx: input "pixels" float32[N,64] (pixel values 0..1), output
  "logits" float32[N,10]. The sut-node converts the uint8 wire samples to
  float32 and scales them by 1/16 (its pre-processing hook) and takes the
  argmax (its post-processing hook).
- samples/NNNN.npy: uint8[64] pixel values 0..16, one file per test image.
- labels.txt: the true digit of each sample, one per line, in file order.
- expected.json: top-1 accuracy of scikit-learn's own predictions and of
  ONNX Runtime (Python) on the exported graph, for the end-to-end tests.
"""

import json
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

HERE = pathlib.Path(__file__).resolve().parent
HIDDEN = 32
PIXEL_SCALE = 16.0


def train():
    digits = load_digits()
    x = digits.data.astype(np.uint8)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=7, stratify=y
    )
    model = MLPClassifier(hidden_layer_sizes=(HIDDEN,), max_iter=600, random_state=0)
    model.fit(x_train / PIXEL_SCALE, y_train)
    return model, x_test, y_test


def export(model):
    """The MLP as MatMul/Add/Relu/MatMul/Add with a dynamic batch dimension."""
    w1, w2 = (w.astype(np.float32) for w in model.coefs_)
    b1, b2 = (b.astype(np.float32) for b in model.intercepts_)
    initializers = [
        numpy_helper.from_array(w1, "w1"),
        numpy_helper.from_array(b1, "b1"),
        numpy_helper.from_array(w2, "w2"),
        numpy_helper.from_array(b2, "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["pixels", "w1"], ["h_mm"]),
        helper.make_node("Add", ["h_mm", "b1"], ["h_pre"]),
        helper.make_node("Relu", ["h_pre"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["o_mm"]),
        helper.make_node("Add", ["o_mm", "b2"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_mlp",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        initializers,
    )
    # Opset 13 and IR 8 load in every ONNX Runtime since 1.10.
    onnx_model = helper.make_model(
        graph,
        producer_name="netdiv make_digits.py",
        opset_imports=[helper.make_opsetid("", 13)],
    )
    onnx_model.ir_version = 8
    onnx.checker.check_model(onnx_model)
    return onnx_model


def main():
    model, x_test, y_test = train()
    onnx_model = export(model)
    onnx.save(onnx_model, HERE / "digits_mlp.onnx")

    samples = HERE / "samples"
    samples.mkdir(exist_ok=True)
    for old in samples.glob("*.npy"):
        old.unlink()
    for i, image in enumerate(x_test):
        np.save(samples / f"{i:04d}.npy", image)
    (HERE / "labels.txt").write_text("".join(f"{label}\n" for label in y_test))

    sklearn_top1 = float(np.mean(model.predict(x_test / PIXEL_SCALE) == y_test))
    import onnxruntime

    session = onnxruntime.InferenceSession(
        str(HERE / "digits_mlp.onnx"), providers=["CPUExecutionProvider"]
    )
    logits = session.run(None, {"pixels": (x_test / PIXEL_SCALE).astype(np.float32)})[0]
    ort_correct = int(np.sum(np.argmax(logits, axis=1) == y_test))
    expected = {
        "samples": int(len(y_test)),
        "correct_onnxruntime": ort_correct,
        "top1_onnxruntime": ort_correct / len(y_test),
        "top1_sklearn": sklearn_top1,
        "onnxruntime_version": onnxruntime.__version__,
    }
    (HERE / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(json.dumps(expected))


if __name__ == "__main__":
    main()
