"""Snakemake adapter: the benchmark's samples and the explorer media -> the sample cards
every model's explorer page shows (results/explorer/samples/)."""

from dualcog.explorer.page import CHUNK_BYTES_LIMIT, write_sample_cards
from dualcog.explorer.records import CARD_COLUMNS, MediaIndex, sample_cards
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow


def main(sm):
    cards = sample_cards(
        read_arrow(sm.input.samples, columns=list(CARD_COLUMNS)),
        MediaIndex.from_table(read_arrow(sm.input.media)),
    )
    paths = write_sample_cards(cards, sm.output.cards)
    largest = max((p.stat().st_size for p in paths), default=0)
    log.info("%d sample cards in %d chunks (largest %d B)", len(cards), len(paths), largest)
    if largest > CHUNK_BYTES_LIMIT:
        log.warning(
            "sample cards over the stated chunk limit (%d B): long questions?", CHUNK_BYTES_LIMIT
        )


run_step(snakemake, main)  # noqa: F821
