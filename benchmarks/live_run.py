"""A live run of the paper's model mix against simulated providers on loopback, timed against
the lower bound those providers allow.

The 45 main-table runs of config/paper.yaml keep their providers: the API routes' base URLs
(config/paper_routes.yaml) name 7 providers, and the 9 served models share one more endpoint
standing in for the vLLM servers. Each provider is an HTTP server on 127.0.0.1 with its own
latency distribution (log-normal), a per-key request limit per window, a cap on requests in
flight, and per-model limits (requests and tokens per window, requests in flight): a request
past any of them gets a 429, as from a real provider. The demo benchmark's 96 requests per
run stand in for the paper's 6,144, and a window of WINDOW_S seconds for a minute, so that the
run takes about a minute where the paper's takes hours at the same shape.

The bound: for each provider, its requests / its allowed rate (per-key limit, or in-flight cap
/ mean latency, whichever is lower); for each run, its requests / its own limits (requests and
tokens per window, in-flight cap / mean latency). The bound is the largest of these. The
prompts and media are built first (untimed); the timed run is `snakemake --cores N` on every
run's responses. The servers count what they saw: requests, 429s by cause, the most in any
window per run and per key, the most in flight per provider and per run.

Usage: python benchmarks/live_run.py [--cores 2] [--baseline REV] [--profile PATH]
       [--baseline-timeout S] [--keep]
--profile runs Snakemake with that profile (e.g. the SLURM one with api_jobs: local).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from _timing import machine
from _workflow import REPO, revision_tree

WINDOW_S = 20.0  # a provider's "minute", scaled down
DEMO = REPO / "resources" / "demo"
SUFFIX = re.compile(r"-(Instant|Thinking|Reasoning)$")
MODEL_FIELD = re.compile(rb'"model"\s*:\s*"([^"]+)"')


@dataclass(frozen=True)
class Provider:
    name: str
    latency_s: float  # median; log-normal with SIGMA
    in_flight: int  # requests in flight on this key, all models
    key_limit: int | None  # requests per window on this key, all models
    per_model_in_flight: int  # each model's cap (the client's `concurrency`)
    model_limit: int | None  # requests per window per model (rpm_limit)
    tokens: int  # tokens each answer reports
    model_tpm: int | None = None  # tokens per window per model (tpm_limit)

    @property
    def mean_latency_s(self) -> float:
        return self.latency_s * math.exp(SIGMA**2 / 2)


SIGMA = 0.35
# One profile per provider of config/paper.yaml (the env variable of its api_base, or
# `served`). in_flight = the api_<provider> cap x per-run concurrency, so a client that holds
# both caps never passes it. The caps are one (run, task) unit per run, each run's tasks in
# turn: fewer units than runs leave runs waiting (siliconflow's 6 runs on 5 units: 98 s where
# the other providers were done by 78). Each run's concurrency leaves room above its rate x
# latency: a request holds its slot while it waits for its rate turn, so a concurrency just
# at rate x latency answers about 15 % below either limit (1.2-1.4 req/s for 1.5).
PROVIDERS = {
    "api_route": Provider("api_route", 0.8, 26, 480, 2, 32, 300),
    "dashscope": Provider("dashscope", 0.6, 14, 280, 2, 40, 400, model_tpm=12000),
    "siliconflow": Provider("siliconflow", 1.2, 24, 240, 4, 32, 300),
    "openrouter": Provider("openrouter", 0.5, 10, 200, 2, 32, 300),
    "mimo": Provider("mimo", 1.5, 8, 80, 4, 32, 300),
    "shlab": Provider("shlab", 0.7, 4, 80, 2, 32, 300),
    "zhipu": Provider("zhipu", 1.0, 4, 40, 4, 28, 300),
    "served": Provider("served", 0.4, 18, None, 2, None, 300),
}


# How each run asks for (or switches off) thinking: kept, so the request bodies are the paper's.
KEPT = ("family", "reasoning_only", "reasoning_effort", "extra_body")


def paper_mix(tree: Path) -> dict[str, list[dict]]:
    """Provider -> its main-table runs (name and the KEPT settings), as config/paper.yaml and
    its routes file spread them."""
    paper = yaml.safe_load((tree / "config" / "paper.yaml").read_text())
    routes = yaml.safe_load((tree / "config" / "paper_routes.yaml").read_text())["api"]["models"]
    mix: dict[str, list[dict]] = defaultdict(list)
    for model in paper["models"]:
        if model.get("main_table") is False:
            continue
        if model.get("serve"):
            provider = "served"
        else:
            base = routes[SUFFIX.sub("", model["name"])]["api_base"]
            provider = base.strip("${}").removesuffix("_BASE_URL").lower()
        mix[provider].append({k: v for k, v in model.items() if k in ("name", *KEPT)})
    return dict(mix)


def requests_per_run(tasks: list[str]) -> int:
    """Samples of `tasks` in the demo benchmark (one request each)."""
    return 96 * len(tasks) // 6  # 16 per task (resources/demo/README.md)


def lower_bound(mix: dict[str, list[dict]], per_run: int) -> tuple[float, list[str]]:
    """The providers' bound in seconds, and one line per provider saying what limits it."""
    lines, bound = [], 0.0
    for name, runs in mix.items():
        p = PROVIDERS[name]
        rates = {"in flight": p.in_flight / p.mean_latency_s}
        if p.key_limit:
            rates["key limit"] = p.key_limit / WINDOW_S
        which = min(rates, key=rates.get)
        provider_s = len(runs) * per_run / rates[which]
        model_rates = {"in flight": p.per_model_in_flight / p.mean_latency_s}
        if p.model_limit:
            model_rates["rpm"] = p.model_limit / WINDOW_S
        if p.model_tpm:
            model_rates["tpm"] = p.model_tpm / p.tokens / WINDOW_S
        model_which = min(model_rates, key=model_rates.get)
        model_s = per_run / model_rates[model_which]
        bound = max(bound, provider_s, model_s)
        lines.append(
            f"  {name:<12} {len(runs):2d} runs {len(runs) * per_run:5d} requests: provider "
            f"{provider_s:6.1f} s ({which}), one run {model_s:6.1f} s ({model_which})"
        )
    return bound, lines


@dataclass
class Counts:
    """What one provider's server saw."""

    arrivals: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    answered: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    in_flight: int = 0
    most_in_flight: int = 0
    run_in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    most_run_in_flight: int = 0
    last_answer: float = 0.0


class Providers:
    """The simulated providers, served from one event loop in a thread of this process."""

    def __init__(self, seed: int = 7) -> None:
        self.random = random.Random(seed)
        self.counts = {name: Counts() for name in PROVIDERS}
        self.windows: dict[tuple[str, str], deque[tuple[float, int]]] = defaultdict(deque)
        self.ports: dict[str, int] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runners: list = []

    def _limit_passed(self, p: Provider, run: str, now: float) -> str | None:
        for key, limit, weight in (
            ((p.name, ""), p.key_limit, 1),
            ((p.name, run), p.model_limit, 1),
            ((p.name, run + "#tokens"), p.model_tpm, p.tokens),
        ):
            if not limit:
                continue
            window = self.windows[key]
            while window and window[0][0] <= now - WINDOW_S:
                window.popleft()
            if sum(w for _, w in window) + weight > limit:
                return "per-key limit" if key[1] == "" else "per-run limit"
        return None

    async def _handle(self, request, p: Provider):
        from aiohttp import web

        body = await request.read()
        found = MODEL_FIELD.search(body)
        run = found.group(1).decode() if found else "?"
        counts, now = self.counts[p.name], time.monotonic()
        counts.arrivals[run].append(now)
        cause = None
        if counts.in_flight >= p.in_flight:
            cause = "provider in flight"
        elif counts.run_in_flight[run] >= p.per_model_in_flight:
            cause = "run in flight"
        else:
            cause = self._limit_passed(p, run, now)
        if cause:
            counts.rejected[cause] += 1
            error = {"error": {"message": f"rate limited: {cause}", "code": 429}}
            return web.json_response(error, status=429, headers={"Retry-After": "1"})
        for key, weight in (("", 1), (run, 1), (run + "#tokens", p.tokens)):
            self.windows[(p.name, key)].append((now, weight))
        counts.in_flight += 1
        counts.run_in_flight[run] += 1
        counts.most_in_flight = max(counts.most_in_flight, counts.in_flight)
        counts.most_run_in_flight = max(counts.most_run_in_flight, counts.run_in_flight[run])
        try:
            await asyncio.sleep(self.random.lognormvariate(math.log(p.latency_s), SIGMA))
        finally:
            counts.in_flight -= 1
            counts.run_in_flight[run] -= 1
        counts.answered += 1
        counts.last_answer = time.monotonic()
        prompt = p.tokens * 3 // 4
        return web.json_response({
            "id": "c", "object": "chat.completion", "created": 0, "model": run,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": '{"answer": "A"}'}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": p.tokens - prompt,
                      "total_tokens": p.tokens},
        })  # fmt: skip

    async def _start(self) -> None:
        from aiohttp import web

        for name, p in PROVIDERS.items():
            app = web.Application(client_max_size=256 * 1024 * 1024)
            app.router.add_post("/v1/chat/completions", lambda r, p=p: self._handle(r, p))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            await site.start()
            self.ports[name] = runner.addresses[0][1]
            self.runners.append(runner)

    def __enter__(self) -> Providers:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result()
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            for runner in self.runners:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)

    def reset(self) -> None:
        def clear() -> None:
            self.counts = {name: Counts() for name in PROVIDERS}
            self.windows.clear()

        self.loop.call_soon_threadsafe(clear)
        time.sleep(0.2)


def most_in_window(arrivals: list[float], window: float) -> int:
    arrivals = sorted(arrivals)
    return max(
        (bisect.bisect_left(arrivals, t + window) - i for i, t in enumerate(arrivals)), default=0
    )


def key_variable(provider: str) -> str:
    return f"LIVE_RUN_{provider.upper()}_KEY"


KEYS = {key_variable(name): f"sk-live-run-{name}" for name in PROVIDERS}


def model_entry(run: dict, provider: str, port: int) -> dict:
    p, name = PROVIDERS[provider], run["name"]
    entry = {
        **run,
        "backend": "openai",
        "api_base": f"http://127.0.0.1:{port}/v1",
        "api_key": "${" + key_variable(provider) + "}",
        "provider": provider,
        "request_model": name,
        "concurrency": p.per_model_in_flight,
        "rate_limit_window_s": WINDOW_S,
        "progress_every_s": 30.0,
    }
    if p.model_limit:
        entry["rpm_limit"] = p.model_limit
    if p.model_tpm:
        entry["tpm_limit"] = p.model_tpm
        entry["estimated_tokens_per_request"] = p.tokens
    return entry


def write_workdir(mix: dict[str, list[dict]], ports: dict[str, int], tasks: list[str]) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="dualcog-live-"))
    config = {
        "data_root": str(DEMO),
        "tasks": tasks,
        "cache_dir": "results/cache",
        "models": [model_entry(n, p, ports[p]) for p, names in mix.items() for n in names],
    }
    (workdir / "config").mkdir()
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return workdir


def snakemake(tree: Path, workdir: Path, args: list[str], timeout: float | None = None):
    # The SLURM executor plugin, where `make` installs it (kept off the venv's own path).
    paths = [str(tree / "src"), str(REPO / ".venv" / "slurm-plugin")]
    env = {**os.environ, **KEYS, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(tree / "Snakefile"),
               "--directory", str(workdir), *args]  # fmt: skip
    log = workdir / "snakemake.log"
    with log.open("a") as out:
        try:
            result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired:
            return None
    if result.returncode != 0:
        raise RuntimeError(f"snakemake failed; see {log}")
    return result


def infer_rules(tree: Path, workdir: Path) -> list[str]:
    """The rules that answer API runs in this tree (`--omit-from` for the untimed build)."""
    env = {**os.environ, **KEYS, "PYTHONPATH": str(tree / "src")}
    listed = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(tree / "Snakefile"),
         "--directory", str(workdir), "--list-rules"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.split()  # fmt: skip
    return [r for r in listed if r == "infer" or r.startswith("infer_api")]


def one_run(tree: Path, label: str, args, providers: Providers, mix, tasks, bound: float):
    workdir = write_workdir(mix, providers.ports, tasks)
    targets = [f"results/responses/{r['name']}/{t}.parquet" for runs in mix.values() for r in runs
               for t in tasks]  # fmt: skip
    caps = [f"api_{name}={p.in_flight // p.per_model_in_flight}" for name, p in PROVIDERS.items()]
    common = ["--cores", str(args.cores), "--resources", *caps]
    if args.profile:
        common += ["--profile", str(tree / args.profile)]  # each revision's own profile
    common += shlex.split(args.snakemake_args)
    snakemake(tree, workdir, [*targets, *common, "--omit-from", *infer_rules(tree, workdir)])
    providers.reset()
    timeout = args.baseline_timeout if tree != REPO else None
    start = time.perf_counter()
    finished = snakemake(tree, workdir, [*targets, *common], timeout=timeout)
    wall = time.perf_counter() - start
    counts = providers.counts
    done = sum(1 for t in targets if (workdir / t).exists())
    expected = len(targets) * requests_per_run(tasks) // len(tasks)
    answered = sum(c.answered for c in counts.values())
    received = sum(len(a) for c in counts.values() for a in c.arrivals.values())
    rejected = defaultdict(int)
    for c in counts.values():
        for cause, n in c.rejected.items():
            rejected[cause] += n
    first = min((t for c in counts.values() for a in c.arrivals.values() for t in a), default=0)
    span = max(c.last_answer for c in counts.values()) - first
    state = "" if finished else f" (stopped after {args.baseline_timeout:.0f} s)"
    ratio = wall / bound
    print(f"{label}: wall {wall:.1f} s{state} = {ratio:.2f}x the bound; {done} of "
          f"{len(targets)} responses files; first request to last answer {span:.1f} s "
          f"({span / bound:.2f}x)")  # fmt: skip
    print(f"    requests: {received} received, {answered} answered of {expected}, "
          f"{received - answered} rejected and re-sent {dict(rejected) or ''}")  # fmt: skip
    held = True
    for name, c in counts.items():
        p = PROVIDERS[name]
        runs = mix.get(name, [])
        key_most = most_in_window([t for a in c.arrivals.values() for t in a], WINDOW_S)
        run_most = max((most_in_window(c.arrivals[r["name"]], WINDOW_S) for r in runs), default=0)
        ok = (c.most_in_flight <= p.in_flight and c.most_run_in_flight <= p.per_model_in_flight
              and (not p.key_limit or key_most <= p.key_limit)
              and (not p.model_limit or run_most <= p.model_limit)
              and (not p.model_tpm or run_most * p.tokens <= p.model_tpm))  # fmt: skip
        held &= ok
        print(f"    {name:<12} in flight {c.most_in_flight:3d}/{p.in_flight:<3d} per run "
              f"{c.most_run_in_flight}/{p.per_model_in_flight}  per window: key "
              f"{key_most:4d}/{p.key_limit or '-'!s:<4} run {run_most:3d}/{p.model_limit or '-'}"
              f"{f' tokens {run_most * p.tokens}/{p.model_tpm}' if p.model_tpm else ''}"
              f"{'' if ok else '  PASSED A LIMIT'}")  # fmt: skip
    if args.keep:
        print(f"    workdir {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return ratio, held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--baseline", help="git revision to run before ours, e.g. main")
    parser.add_argument("--baseline-timeout", type=float, default=1800.0)
    parser.add_argument("--profile", help="a Snakemake profile (path in the repository)")
    parser.add_argument("--snakemake-args", default="", help="more arguments, shell-quoted")
    parser.add_argument("--only-baseline", action="store_true", help="skip our tree's run")
    parser.add_argument("--keep", action="store_true", help="keep the working directories")
    args = parser.parse_args()
    tasks = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["tasks"]
    mix = paper_mix(REPO)
    per_run = requests_per_run(tasks)
    bound, lines = lower_bound(mix, per_run)
    runs = sum(len(r) for r in mix.values())
    print(f"machine: {machine()}")
    profile = f" --profile {args.profile}" if args.profile else ""
    print(f"{runs} runs x {per_run} requests on {len(mix)} providers, window {WINDOW_S:.0f} s; "
          f"--cores {args.cores}{profile} {args.snakemake_args}")  # fmt: skip
    print("\n".join(lines))
    print(f"providers' bound: {bound:.1f} s")
    trees = {}
    if args.baseline:
        trees[f"baseline {args.baseline}"] = revision_tree(args.baseline)
    if not args.only_baseline:
        trees["ours"] = REPO
    with Providers() as providers:
        for label, tree in trees.items():
            one_run(tree, label, args, providers, mix, tasks, bound)


if __name__ == "__main__":
    main()
