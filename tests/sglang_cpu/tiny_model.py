"""A tiny Llama model folder for real SGLang on CPU: config, a locally trained tokenizer, a chat template.

No weights: serve it with `--load-format dummy` (SGLang fills every parameter from a fixed seed). 2 layers,
hidden 128, 2 query heads and 1 KV head of 64 dims (head_dim 64: the CPU attention kernels reject smaller
ones), a 1,024-entry vocabulary. The tokenizer is a byte-level BPE trained with the `tokenizers` package on the
plugin's own prompt texts, so any text encodes and the building needs no download. Deterministic: the same
files, byte for byte, on every build.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_sglang_perf import prompts

VOCAB_SIZE = 1024
CONTEXT_LEN = 4096
PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)
"""Token ids 0, 1, 2 in this order."""
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "vocab_size": VOCAB_SIZE,
    "max_position_embeddings": CONTEXT_LEN,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 0,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
TOKENIZER_CONFIG: dict[str, Any] = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": None,
    "eos_token": IM_END,
    "pad_token": PAD,
    "model_max_length": CONTEXT_LEN,
    "clean_up_tokenization_spaces": False,
    "chat_template": CHAT_TEMPLATE,
}


def training_texts() -> list[str]:
    """Every prompt text the plugin ships (pytest_sglang_perf.prompts), in a fixed order."""
    return [value for _, value in sorted(vars(prompts).items()) if isinstance(value, str) and len(value) > 40]


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _write_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(training_texts(), trainer)
    path.write_text(tokenizer.to_str(pretty=True) + "\n", encoding="utf-8")


def build_tiny_model(directory: Path) -> Path:
    """Write the model folder (config.json, tokenizer.json, tokenizer_config.json) into `directory`, created if
    needed, and return it. Serve it with `--load-format dummy`."""
    directory.mkdir(parents=True, exist_ok=True)
    _write_json(directory / "config.json", CONFIG)
    _write_json(directory / "tokenizer_config.json", TOKENIZER_CONFIG)
    _write_json(directory / "special_tokens_map.json", {"eos_token": IM_END, "pad_token": PAD})
    _write_tokenizer(directory / "tokenizer.json")
    return directory
