"""Writes small data sets in exactly the formats the MLPerf reference
implementations read (mlcommons/inference), with the libraries they use,
for netdiv's data-set tests:

  llama2.pkl, llama2.pkl.gz  pandas pickle like language/llama2-70b's
                             open_orca_gpt4_tokenized_llama.sampled_24576.pkl
                             (processorca.py: tok_input a list of int)
  arrays.pkl                 the same, tok_input cells numpy int64 arrays
                             (as a parquet round trip leaves them)
  cnn_eval.json              language/llama3.1-8b's cnn_eval.json
                             (download_cnndm.py: a JSON array of objects)
  text_only.pkl              deepseek-r1's columns: prompts as text only
  kits/                      vision/medical_imaging/3d-unet-kits19's
                             preprocessed folder (preprocess.py):
                             preprocessed_files.pkl and case_XXXXX.pkl

and beside them expected.json: each data set's samples as the QSL must
send them (token ids; for kits the volume files' raw float32 bytes are
kits_raw/case_XXXXX.bin).

Usage: python3 make_datasets.py OUTDIR
"""
import json
import os
import pickle
import sys

import numpy as np
import pandas as pd

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)

# llama2-70b: 12 prompts of 3..40 tokens, the last token 29871 as the
# reference appends it.
prompts = [
    [int(t) for t in rng.integers(1, 32000, size=int(n))] + [29871]
    for n in rng.integers(2, 40, size=12)
]
frame = pd.DataFrame({
    "id": [f"cot.{i}" for i in range(len(prompts))],
    "system_prompt": ["be helpful"] * len(prompts),
    "question": [f"question {i}" for i in range(len(prompts))],
    "output": [f"answer {i}" for i in range(len(prompts))],
    "input": [f"<s>[INST] question {i} [/INST]" for i in range(len(prompts))],
    "tok_input": prompts,
    "tok_output": [[1, 263 + i] for i in range(len(prompts))],
    "origin": ["cot"] * len(prompts),
    "tok_input_length": [len(p) for p in prompts],
    "tok_output_length": [2] * len(prompts),
})
frame.to_pickle(os.path.join(out, "llama2.pkl"))
frame.to_pickle(os.path.join(out, "llama2.pkl.gz"))

arrays = frame.copy()
arrays["tok_input"] = [np.array(p, dtype=np.int64) for p in prompts]
arrays.to_pickle(os.path.join(out, "arrays.pkl"))

# llama3.1-8b: a JSON array of objects, as download_cnndm.py writes it.
template = ("Summarize the following news article in 128 tokens. Please output the "
            "summary only, without any other text.\n\nArticle:\n{input}\n\nSummary:")
cnn = [
    {"instruction": {"llama": template}, "input": f"article {i}",
     "tok_input": [128000] + [int(t) for t in rng.integers(0, 128000, size=5 + i)],
     "output": f"summary {i}"}
    for i in range(9)
]
with open(os.path.join(out, "cnn_eval.json"), "w") as f:
    json.dump(cnn, f, indent=4, ensure_ascii=False)

# deepseek-r1's pickle holds prompts as text, tokenized at run time.
pd.DataFrame({
    "text_input": ["What is 2+2?", "Prove it."],
    "dataset": ["math500", "math500"],
    "ground_truth": ["4", "qed"],
    "tok_input_len": [7, 4],
}).to_pickle(os.path.join(out, "text_only.pkl"))

# 3d-unet: two cases of (1, D, 128, 128) float32, each with its label.
kits = os.path.join(out, "kits")
raw = os.path.join(out, "kits_raw")
os.makedirs(kits, exist_ok=True)
os.makedirs(raw, exist_ok=True)
cases = {}
for name, depth in [("case_00000", 128), ("case_00003", 192)]:
    image = rng.standard_normal((1, depth, 128, 128)).astype(np.float32)
    label = (image > 1.0).astype(np.uint8)
    with open(os.path.join(kits, name + ".pkl"), "wb") as f:
        pickle.dump([image, label], f)
    image.tofile(os.path.join(raw, name + ".bin"))
    cases[name] = {"case": name, "image_shape": image.shape,
                   "original_affine": np.eye(4), "reshaped_affine": np.eye(4),
                   "zoom_factor": np.ones(3)}
with open(os.path.join(kits, "preprocessed_files.pkl"), "wb") as f:
    pickle.dump({"file_list": list(cases), "cases": cases}, f)

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"llama2": prompts, "cnn_eval": [c["tok_input"] for c in cnn],
               "kits": list(cases)}, f)
print("numpy", np.__version__, "pandas", pd.__version__)
