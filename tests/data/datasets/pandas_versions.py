"""Writes a llama2-70b-style frame (id, input, output, tok_input and
tok_output as lists of int, 12 rows) the way one pandas writes it, for the
test that every pandas a submitter may have is read: `to_pickle`, and
`to_json` in each orient `pd.read_json` reads. With `--infer-string`
(pandas 2), strings are pyarrow-backed, as pandas 3 makes them whenever
pyarrow is installed.

Usage: python3 pandas_versions.py OUTDIR LABEL [--infer-string]

Writes OUTDIR/LABEL.pkl, OUTDIR/LABEL.ORIENT.json and
OUTDIR/LABEL.expected.json (the tok_input lists in row order).
"""
import json
import os
import sys

import pandas as pd

out, label = sys.argv[1], sys.argv[2]
if "--infer-string" in sys.argv[3:]:
    pd.options.future.infer_string = True
os.makedirs(out, exist_ok=True)

prompts = [[1 + (7 * i + j) % 31999 for j in range(3 + (5 * i) % 17)] + [29871] for i in range(12)]
frame = pd.DataFrame({
    "id": [f"cot.{i}" for i in range(len(prompts))],
    "input": [f"<s>[INST] question {i} [/INST]" for i in range(len(prompts))],
    "output": [f"answer {i}" for i in range(len(prompts))],
    "tok_input": prompts,
    "tok_output": [[1, 263 + i] for i in range(len(prompts))],
})
# Rows out of label order, as a sampled data set has them.
frame = frame.iloc[[3, 0, 11, 5, 1, 2, 4, 10, 6, 7, 9, 8]]
frame.to_pickle(os.path.join(out, f"{label}.pkl"))
for orient in ["records", "split", "table", "columns", "index", "values"]:
    frame.to_json(os.path.join(out, f"{label}.{orient}.json"), orient=orient)
with open(os.path.join(out, f"{label}.expected.json"), "w") as f:
    json.dump([list(map(int, p)) for p in frame["tok_input"]], f)
# What pd.read_json itself reads back from the default orient.
back = pd.read_json(os.path.join(out, f"{label}.columns.json"))
assert [list(p) for p in back["tok_input"]] == [list(p) for p in frame["tok_input"]]
print(label, pd.__version__, frame["id"].dtype, len(frame))
