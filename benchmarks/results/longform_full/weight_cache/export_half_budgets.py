"""parakeet-export with the subsampling's chunk budget and the attention's block budget at 4 MiB instead of 8.

Usage: python export_half_budgets.py <parakeet-export arguments>. The budgets are the defaults of
``query_block_count`` and ``chunk_count`` (bound at definition), so they are replaced there before the export runs.
"""

import sys

import parakeet_executorch.export.xnnpack.attention_blocks as attention_blocks
import parakeet_executorch.export.xnnpack.subsampling_chunks as subsampling_chunks
from parakeet_executorch.export.cli import main

if __name__ == "__main__":
    half = 4 * 2**20
    attention_blocks.query_block_count.__defaults__ = (half,)
    subsampling_chunks.chunk_count.__defaults__ = (half,)
    sys.exit(main(sys.argv[1:]))
