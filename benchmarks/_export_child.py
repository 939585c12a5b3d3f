"""Child process of bench_export.py: runs ``parakeet-export`` with the encoder traced under
``xnnpack_friendly_encoder`` (the module-level rewrites), until export/program.py applies them itself."""

from __future__ import annotations

import sys


def main(argv):
    rewrites = "--no-module-rewrites" not in argv
    argv = [a for a in argv if a != "--no-module-rewrites"]
    from parakeet_executorch.export import program
    from parakeet_executorch.export.cli import main as export_main

    if rewrites and not getattr(program, "APPLIES_XNNPACK_REWRITES", False):
        from parakeet_executorch.export.xnnpack_rewrites import xnnpack_friendly_encoder

        original = program.export_methods

        def export_methods(nemo_model, meta, *args, **kwargs):
            with xnnpack_friendly_encoder(nemo_model.encoder):
                return original(nemo_model, meta, *args, **kwargs)

        program.export_methods = export_methods
    return export_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
