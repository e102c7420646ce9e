"""Write a tiny, randomly initialised model to a folder: LLaVA-style VLM, or `--text-only`.

Nothing is downloaded: the tokenizer is byte-level with no merges (every byte is a token), the
vision tower is a two-layer CLIP on 56x56 inputs and the language model a one-layer Llama, all
with random weights, so it answers nonsense, fast. It exists to start a real `vllm serve` on a
CPU in the opt-in test `make test-vllm`. (vLLM needs torchvision for any vision model; where
only a CUDA build of torchvision is at hand beside a CPU torch, the text-only model still
exercises the real server.)

    python tests/vllm/make_tiny_model.py OUT_DIR [--text-only]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ('image', 'image_url') %}<image>"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
IMAGE_SIZE = 56
PATCH = 14


def tokenizer() -> PreTrainedTokenizerFast:
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    core = Tokenizer(models.BPE(vocab={s: i for i, s in enumerate(sorted(alphabet))}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL})
    fast.chat_template = CHAT_TEMPLATE
    return fast


def main(out: Path, text_only: bool) -> None:
    torch.manual_seed(0)
    tok = tokenizer()
    ids = {token: tok.convert_tokens_to_ids(token) for token in SPECIAL}
    out.mkdir(parents=True, exist_ok=True)
    text = LlamaConfig(
        vocab_size=len(tok) + (-len(tok)) % 64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    if text_only:
        LlamaForCausalLM(text).to(torch.float32).save_pretrained(out)
        tok.save_pretrained(out)
        return
    # Imported here: these need torchvision in recent transformers releases.
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
        projection_dim=32,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=ids["<image>"],
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
    )
    LlavaForConditionalGeneration(config).to(torch.float32).save_pretrained(out)
    images = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=tok,
        patch_size=PATCH,
        vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE,
        image_token="<image>",
    )
    processor.save_pretrained(out)
    tok.save_pretrained(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--text-only" in sys.argv[2:])
