"""Local model servers: starting, checking and stopping `vllm serve` (`server`), and what a
served model saw, recorded per run (`facts`)."""
