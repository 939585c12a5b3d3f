#!/usr/bin/env python3
"""Export a NeMo Parakeet TDT checkpoint to ExecuTorch (same CLI as ``parakeet-export``).

python export_parakeet_tdt.py --model nvidia/parakeet-tdt-0.6b-v3 --backend xnnpack --quantize 8da4w
"""

import sys

from parakeet_executorch.export.cli import main

if __name__ == "__main__":
    sys.exit(main())
