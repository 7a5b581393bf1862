#!/usr/bin/env python3
"""Writes a tiny Llama model as a Hugging Face directory, for vLLM.

The vLLM counterpart of make_tiny_llama.py (llama.cpp's GGUF): a
`LlamaConfig` of 2 layers, hidden size 128, 4 heads, a 32000-token
vocabulary, random weights from a fixed seed saved with
`save_pretrained` (safetensors), and the tokenizer of
make_tiny_tokenizer.py (the same ids: <unk>, <s>, </s>, 256 byte tokens,
then the words "\u2581w0", "\u2581w1", ...), so AIPerf and vLLM count the
same tokens.

As in the GGUF model, the end-of-sequence row of the output layer (id 2)
and the byte tokens' rows are zero while the others' logits are large:
a greedy answer never ends early, every answer is `max_tokens` long, so
the tests get answers of the lengths they ask for without `ignore_eos`
(which the shipped engine config does not set).

Needs torch and transformers (the vLLM environment has both):
deploy/llm/vllm-cpu.sh runs it and caches the directory.

Usage: python3 make_tiny_hf_llama.py OUT_DIR
"""

import json
import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_tokenizer  # noqa: E402

VOCAB = make_tiny_tokenizer.VOCAB
SEED = 20261128


def main(out_dir):
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=32768,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        out = model.lm_head.weight
        out.normal_(0.0, 8.0 / config.hidden_size**0.5)
        out[2].zero_()
        out[3:259].zero_()
    model.to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    make_tiny_tokenizer.main(out_dir)
    # vLLM reads the chat-free tokenizer config; name the special tokens'
    # ids as the model config does.
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_hf_llama.py OUT_DIR")
    main(sys.argv[1])
