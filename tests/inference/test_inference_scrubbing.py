"""API keys never reach stored text, also when a server echoes them encoded or masked."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import pytest
from frames import arrow
from loopback_server import LoopbackServer, Reply

from dualcog import schemas
from dualcog.inference import cache_path, run_model
from dualcog.inference.scrubbing import scrub

KEY = "sk-abcdeFGH/ij+KLmn=opq_rs-tuvwxyz"


def b64(data: str, urlsafe: bool = False, padding: bool = True) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = encode(data.encode()).decode()
    return text if padding else text.rstrip("=")


ECHOES = {
    "plain": KEY,
    "percent-encoded": quote(KEY, safe=""),
    "percent-encoded, lower-case hex": re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(KEY)),
    "every byte percent-encoded": "".join(f"%{b:02X}" for b in KEY.encode()),
    "form-encoded": quote(KEY, safe="+").replace("%2B", "+"),
    "masked with an ellipsis": f"{KEY[:8]}…{KEY[-4:]}",
    "masked with three dots": f"{KEY[:8]}...{KEY[-4:]}",
    "masked with stars": f"{KEY[:8]}****************{KEY[-4:]}",
    **{
        f"base64 {'urlsafe' if u else 'std'} {'padded' if p else 'unpadded'} of {what}": b64(
            text, u, p
        )
        for u in (False, True)
        for p in (False, True)
        for what, text in {
            "the key": KEY,
            "Bearer key": f"Bearer {KEY}",
            "user:key": f"user:{KEY}",
            "u:key": f"u:{KEY}",
            "apikey:key": f"apikey:{KEY}",
        }.items()
    },
}


@pytest.mark.parametrize("form", sorted(ECHOES))
def test_each_encoding_of_the_key_is_scrubbed(form):
    echo = ECHOES[form]
    text = scrub(f'{{"error": "invalid key {echo} given"}}', [KEY])
    assert text.startswith('{"error": "invalid key ') and text.endswith(' given"}')
    assert "***" in text
    for leak in (KEY, KEY[3:11], KEY[-12:], b64(KEY)[4:16], b64(KEY, True)[4:16]):
        assert leak not in text, (form, text)


@pytest.mark.parametrize(
    "key", ["sk-proj-AbCdEf0123456789xY+/w==", "AbCdEfGh1234567890Ij+", "aB+/cDeFgH12345678kl/"]
)
@pytest.mark.parametrize("gap", ["…", "...", "****"])
def test_a_masked_key_ending_or_starting_in_base64_characters_is_scrubbed(key, gap):
    for head, tail in ((8, 4), (4, 4), (8, 2)):
        text = scrub(f'{{"error": "Incorrect API key: {key[:head]}{gap}{key[-tail:]}."}}', [key])
        assert text == '{"error": "Incorrect API key: ***."}', (head, tail, text)


def test_other_text_is_left_alone():
    text = 'a sk-zzz…qqq of someone else, "aGVsbG8gd29ybGQ=" and 100% of 50%20 ...'
    assert scrub(text, [KEY]) == text
    assert scrub(None, [KEY]) is None
    assert scrub("EMPTY is not a secret", ["EMPTY"]) == "EMPTY is not a secret"


def test_a_401_echoing_the_key_leaves_it_neither_in_the_cache_nor_the_responses(
    media_store, tmp_path, monkeypatch
):
    monkeypatch.setenv("DUALCOG_SCRUB_KEY", KEY)
    echoes = list(ECHOES.values())

    def refuse(body: dict, count: int) -> Reply:
        text = body["messages"][-1]["content"][0]["text"]
        return 401, {"error": {"message": f"bad key {echoes[int(text)]}"}}, {}

    prompts = pd.DataFrame(
        [
            {
                "sample_id": f"s{i:03d}",
                "task": "behavior",
                "request_key": f"rk{i:03d}",
                "system_text": "s",
                "user_text": str(i),
                "media_keys": [],
                "media_kinds": [],
                "offered_option_ids": ["A"],
            }
            for i in range(len(echoes))
        ]
    )
    prompts = schemas.to_table(prompts, schemas.PROMPTS).to_pandas()
    with LoopbackServer(refuse) as server:
        model = {
            "name": "M-Instant",
            "backend": "openai",
            "family": "qwen_vllm",
            "api_base": server.api_base,
            "api_key": "${DUALCOG_SCRUB_KEY}",
            "max_retries": 0,
        }
        out = run_model(model, arrow(prompts), None, media_store, tmp_path / "c").to_pandas()
    assert list(out.error_type) == ["http_401"] * len(echoes)
    cached = Path(cache_path(tmp_path / "c", "M-Instant", "behavior")).read_text()
    stored = out.to_json() + cached
    messages = [
        *out.error_message,
        *(json.loads(line)["error_message"] for line in cached.splitlines()),
    ]
    assert len(messages) == 2 * len(echoes)
    assert [m for m in messages if not m.endswith("bad key ***")] == []
    for leak in {KEY, KEY[3:11], KEY[-12:], *(b64(KEY, u, False)[4:16] for u in (0, 1))}:
        assert leak not in stored, [m for m in messages if leak in m]


@pytest.mark.parametrize(
    "key", ["sk-proj-Zx81Qm0aLp4Rt7Vw2Ye5+/Ab==", "Qm0aLp4Rt7Vw2Ye5Zx81+", "Rt7Vw2Ye5Zx81Qm0aLp/"]
)
def test_a_401_echoing_a_masked_key_ending_in_base64_characters_leaves_no_file_with_it(
    media_store, tmp_path, monkeypatch, key
):
    monkeypatch.setenv("DUALCOG_SCRUB_KEY", key)
    masked = f"{key[:8]}…{key[-4:]}"

    def refuse(body: dict, count: int) -> Reply:
        return 401, {"error": {"message": f"Incorrect API key provided: {masked}."}}, {}

    row = {"sample_id": "s1", "task": "behavior", "request_key": "rk1", "system_text": "s",
           "user_text": "u", "media_keys": [], "media_kinds": [],
           "offered_option_ids": ["A"]}  # fmt: skip
    prompts = schemas.to_table(pd.DataFrame([row]), schemas.PROMPTS).to_pandas()
    with LoopbackServer(refuse) as server:
        model = {"name": "M-Instant", "backend": "openai", "family": "qwen_vllm",
                 "api_base": server.api_base, "api_key": "${DUALCOG_SCRUB_KEY}",
                 "max_retries": 0}  # fmt: skip
        out = run_model(model, arrow(prompts), None, media_store, tmp_path / "c").to_pandas()
    out.to_parquet(tmp_path / "c" / "responses.parquet")
    assert out.error_message[0].endswith("Incorrect API key provided: ***."), out.error_message[0]
    files = [path for path in (tmp_path / "c").rglob("*") if path.is_file()]
    assert len(files) >= 2
    for path in files:
        data = path.read_bytes()
        for leak in (masked, key[:8], masked.encode("unicode_escape").decode()):
            assert leak.encode() not in data, (path, leak)
