#!/usr/bin/env python3
"""Writes a tokenizer directory for the tiny Llama model, for AIPerf.

AIPerf loads a Hugging Face tokenizer for every run, even when it takes
its output token counts from the server, and no model hub is reachable
here. This writes `tokenizer.json` (and a `tokenizer_config.json`) with the
`tokenizers` package: the tiny model's own vocabulary
(tests/data/llm/make_tiny_llama.py: <unk>, <s>, </s>, the 256 byte tokens,
then the words "\u2581w0", "\u2581w1", ...), whole words looked up as in
SentencePiece (a "\u2581" before each space-separated word). The model
answers only in those words, so counting the text of an answer with this
tokenizer gives the ids the engine streamed.

Usage: python3 make_tiny_tokenizer.py OUT_DIR
"""

import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

# As make_tiny_llama.py: keep the two in step.
VOCAB = 32000


def vocabulary():
    names = ["<unk>", "<s>", "</s>"]
    names += [f"<0x{b:02X}>" for b in range(256)]
    names += [f"\u2581w{i}" for i in range(VOCAB - len(names))]
    return {name: i for i, name in enumerate(names)}


def main(out_dir):
    tokenizer = Tokenizer(models.WordLevel(vocab=vocabulary(), unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always"
    )
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    os.makedirs(out_dir, exist_ok=True)
    tokenizer.save(os.path.join(out_dir, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": 4096,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    # The check the benchmark relies on: words round-trip to their ids.
    ids = tokenizer.encode(" w0 w17 w31740").ids
    expected = [259, 276, 31999]
    if ids != expected:
        sys.exit(f"tokenizer check: ' w0 w17 w31740' gave {ids}, not {expected}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_tokenizer.py OUT_DIR")
    main(sys.argv[1])
