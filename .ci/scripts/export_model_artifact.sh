#!/usr/bin/env bash
# Export a Parakeet TDT model to DIR/model.pte + DIR/tokenizer.model (+ DIR/export_report.json) for CI.
#
#   bash .ci/scripts/export_model_artifact.sh MODEL_ID QUANT_NAME OUTPUT_DIR BACKEND
#
# MODEL_ID    a Hugging Face id (nvidia/parakeet-tdt-0.6b-v3), a local .nemo file, "demo": the trained demo model
#             shipped in the package (demo_model/), or "test-tiny": the random-weight tiny model built with
#             parakeet-make-test-model into OUTPUT_DIR first. Neither of the last two needs hub access.
# QUANT_NAME  -> parakeet-export --quantize, and the backends it is allowed with:
#               non-quantized               none    portable, xnnpack, metal, mlx, cuda
#               quantized-int4-metal        fpa4w   metal, mlx
#               quantized-int4-tile-packed  4w      cuda
#               quantized-8da4w             8da4w   xnnpack
#               quantized-8da8w             8da8w   xnnpack
#               quantized-8w                8w      portable, metal, cuda
# BACKEND     portable | xnnpack | metal | mlx | cuda
#
# The name/backend pair is checked before anything is loaded. Environment: PYTHON (interpreter with the package,
# default python), EXPORT_EXTRA_ARGS (more parakeet-export arguments, split on spaces, e.g. "--dtype bf16").
# Written to be bash 3.2 compatible (macOS /bin/bash).
set -euo pipefail

PYTHON="${PYTHON:-python}"
ALLOWED_PAIRS="non-quantized: portable, xnnpack, metal, mlx, cuda; quantized-int4-metal: metal, mlx; \
quantized-int4-tile-packed: cuda; quantized-8da4w: xnnpack; quantized-8da8w: xnnpack; \
quantized-8w: portable, metal, cuda"

die() { echo "export_model_artifact: error: $*" >&2; exit 2; }
usage() {
  echo "usage: $0 MODEL_ID QUANT_NAME OUTPUT_DIR BACKEND" >&2
  echo "  MODEL_ID: Hugging Face id, path to a .nemo file, demo, or test-tiny" >&2
  echo "  allowed QUANT_NAME/BACKEND pairs: $ALLOWED_PAIRS" >&2
  exit 2
}

[ "$#" -eq 4 ] || usage
MODEL_ID="$1"
QUANT_NAME="$2"
OUTPUT_DIR="$3"
BACKEND="$4"
[ -n "$MODEL_ID" ] || die "MODEL_ID is empty"
[ -n "$OUTPUT_DIR" ] || die "OUTPUT_DIR is empty"

case "$BACKEND" in
  portable | xnnpack | metal | mlx | cuda) ;;
  *) die "unknown backend '$BACKEND'; choose one of portable, xnnpack, metal, mlx, cuda. Allowed pairs: $ALLOWED_PAIRS" ;;
esac

case "$QUANT_NAME" in
  non-quantized)              RECIPE=none;  BACKENDS="portable xnnpack metal mlx cuda" ;;
  quantized-int4-metal)       RECIPE=fpa4w; BACKENDS="metal mlx" ;;
  quantized-int4-tile-packed) RECIPE=4w;    BACKENDS="cuda" ;;
  quantized-8da4w)            RECIPE=8da4w; BACKENDS="xnnpack" ;;
  quantized-8da8w)            RECIPE=8da8w; BACKENDS="xnnpack" ;;
  quantized-8w)               RECIPE=8w;    BACKENDS="portable metal cuda" ;;
  *) die "unknown quantization name '$QUANT_NAME'. Allowed pairs: $ALLOWED_PAIRS" ;;
esac

case " $BACKENDS " in
  *" $BACKEND "*) ;;
  *) die "'$QUANT_NAME' cannot be exported for backend '$BACKEND' (it is for: ${BACKENDS// /, }). Allowed pairs: $ALLOWED_PAIRS" ;;
esac

command -v "$PYTHON" >/dev/null || die "$PYTHON not found; set PYTHON to the interpreter with parakeet-executorch"
mkdir -p "$OUTPUT_DIR"

MODEL="$MODEL_ID"
if [ "$MODEL_ID" = "test-tiny" ]; then
  MODEL="$OUTPUT_DIR/test-tiny.nemo"
  echo "export_model_artifact: building the tiny random-weight test model -> $MODEL"
  "$PYTHON" -m parakeet_executorch.testing.make_model --size tiny --seed 0 --out "$MODEL"
elif [ "$MODEL_ID" = "demo" ]; then
  MODEL="$("$PYTHON" -c 'from parakeet_executorch.demo import DEMO_MODEL; print(DEMO_MODEL)')"
  [ -f "$MODEL" ] || die "the demo model $MODEL is missing from the installed package"
elif [[ "$MODEL_ID" == *.nemo ]] && [ ! -f "$MODEL_ID" ]; then
  die "$MODEL_ID: no such .nemo file"
fi

extra_args=()
if [ -n "${EXPORT_EXTRA_ARGS:-}" ]; then
  read -r -a extra_args <<< "$EXPORT_EXTRA_ARGS"
fi

echo "export_model_artifact: $MODEL_ID, $QUANT_NAME (--quantize $RECIPE), backend $BACKEND -> $OUTPUT_DIR"
# "${extra_args[@]+...}": an empty array under set -u is an error in bash < 4.4.
"$PYTHON" -m parakeet_executorch.export.cli --model "$MODEL" --backend "$BACKEND" --quantize "$RECIPE" \
  --output-dir "$OUTPUT_DIR" ${extra_args[@]+"${extra_args[@]}"}

for f in model.pte tokenizer.model; do
  [ -s "$OUTPUT_DIR/$f" ] || die "$OUTPUT_DIR/$f is missing or empty after the export"
done
echo "export_model_artifact: artifacts in $OUTPUT_DIR:"
ls -l "$OUTPUT_DIR"
