#!/usr/bin/env bash
# One node, NPROC processes (default: one per GPU, else 2 CPU processes over gloo), through torchrun.
# A killed or failed worker restarts all workers (up to MAX_RESTARTS times); training resumes
# from the latest checkpoint in CKPT.
#
#   bash trainers/torchrun_single_node.sh [more `autorec train` options]
#
# Environment: ARCH (preset or arch.json; default dlrm), DATA (dataset; default synthetic),
# DATA_OPTS (--data-opt values, space-separated; default preset=tiny), NPROC, MAX_RESTARTS (3),
# CKPT (checkpoints/torchrun-single), PYTHON (python).
set -euo pipefail
PYTHON=${PYTHON:-python}
NPROC=${NPROC:-$("$PYTHON" -c "import torch; print(torch.cuda.device_count() or 2)")}
data_opts=()
for opt in ${DATA_OPTS:-preset=tiny}; do data_opts+=(--data-opt "$opt"); done

exec "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$NPROC" \
    --max-restarts "${MAX_RESTARTS:-3}" \
    -m autorec.cli train --arch "${ARCH:-dlrm}" --data "${DATA:-synthetic}" "${data_opts[@]}" \
    --checkpoint-dir "${CKPT:-checkpoints/torchrun-single}" "$@"
