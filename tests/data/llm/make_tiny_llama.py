#!/usr/bin/env python3
"""Writes a tiny Llama-architecture model in GGUF for the LLM serving tests.

Random weights (a fixed seed, so the same file every time), a Llama 2-sized
vocabulary of 32000 token ids (the ids netdiv's synthetic prompts use), and
a model small enough that llama.cpp runs it on a CPU in well under a
millisecond per token: 2 layers, 32-wide embeddings, 4 heads, 64-wide
feed-forward, a 4096-token context. Its answers are nonsense but
deterministic: llama.cpp decoding greedily gives the same tokens for the
same prompt, which is what the tests compare.

Token 2 is the end-of-sequence token; its output row is zero, so its logit
is 0 while the largest of the other random logits is far above: a greedy
answer never ends early, every answer is `max_tokens` long. The rows of
the 256 byte tokens are zero too, so answers are whole UTF-8 characters.

Needs the `gguf` and `numpy` packages from PyPI. deploy/llm/llama-cpp.sh
runs it (in a virtual environment of its own) and caches the file:

    bash deploy/llm/llama-cpp.sh model      # prints the .gguf path

or by hand: python3 make_tiny_llama.py OUT.gguf
"""

import sys

import gguf
import numpy as np

VOCAB = 32000
EMBED = 32
HEADS = 4
FEED_FORWARD = 64
LAYERS = 2
CONTEXT = 4096
SEED = 20261124


def tokens():
    """The vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then words."""
    names = ["<unk>", "<s>", "</s>"]
    types = [
        gguf.TokenType.UNKNOWN,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
    ]
    names += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    words = VOCAB - len(names)
    names += [f"\u2581w{i}" for i in range(words)]
    types += [gguf.TokenType.NORMAL] * words
    scores = [0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(words)]
    return names, scores, types


def main(path):
    rng = np.random.default_rng(SEED)

    def weight(rows, cols, scale=1.0):
        w = rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)
        return w.astype(np.float32)

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("netdiv-tiny-llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(EMBED // HEADS)
    writer.add_vocab_size(VOCAB)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    names, scores, types = tokens()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(names)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)

    ones = np.ones(EMBED, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(VOCAB, EMBED, np.sqrt(EMBED)))
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{name}.weight", weight(EMBED, EMBED))
        writer.add_tensor(f"{block}.ffn_norm.weight", ones)
        writer.add_tensor(f"{block}.ffn_gate.weight", weight(FEED_FORWARD, EMBED))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(FEED_FORWARD, EMBED))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(EMBED, FEED_FORWARD))
    writer.add_tensor("output_norm.weight", ones)
    # Large logits keep the greedy choice clear of near-ties; the end of
    # sequence (row 2) stays at 0, below the best of the others.
    output = weight(VOCAB, EMBED, 8.0)
    output[2] = 0.0
    # Nor does it pick a byte token: one alone may be part of a UTF-8
    # character, which llama.cpp does not stream until it is whole.
    output[3:259] = 0.0
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_llama.py OUT.gguf")
    main(sys.argv[1])
