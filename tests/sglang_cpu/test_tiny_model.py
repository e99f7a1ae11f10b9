"""The tiny model folder the real-SGLang tests serve: deterministic, fast to build, loadable by transformers."""

from __future__ import annotations

import time
from pathlib import Path

from tiny_model import CONFIG, IM_END, PAD, SPECIAL_TOKENS, build_tiny_model


def test_builds_the_same_files_in_well_under_two_seconds(tmp_path: Path) -> None:
    start = time.perf_counter()
    first = build_tiny_model(tmp_path / "a")
    elapsed = time.perf_counter() - start
    second = build_tiny_model(tmp_path / "b" / "nested")
    names = sorted(p.name for p in first.iterdir())
    assert names == ["config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    assert [(first / n).read_bytes() for n in names] == [(second / n).read_bytes() for n in names]
    assert elapsed < 2.0


def test_transformers_loads_it_as_a_llama_with_a_chat_template(tiny_model: Path) -> None:
    import transformers

    config = transformers.AutoConfig.from_pretrained(tiny_model)
    assert type(config).__name__ == "LlamaConfig"
    assert config.num_attention_heads * config.head_dim == 128 and config.num_key_value_heads == 1
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    assert len(tokenizer) <= CONFIG["vocab_size"]
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2]
    assert (tokenizer.eos_token, tokenizer.pad_token) == (IM_END, PAD)
    assert tokenizer.eos_token_id == CONFIG["eos_token_id"]
    chat = [{"role": "user", "content": "Ünïcödé ✓ and plain words"}]
    text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nÜnïcödé ✓ and plain words<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer(text)["input_ids"]
    assert max(ids) < CONFIG["vocab_size"]
    assert tokenizer.decode(ids) == text
