#!/usr/bin/env bash
# NNODES nodes x NPROC processes, elastic c10d rendezvous at RDZV_ENDPOINT (HOST:PORT of any one
# node, usually the first). Run the same command on every node, with the same RUN_ID:
#
#   NNODES=2 RDZV_ENDPOINT=node0:29400 RUN_ID=run1 bash trainers/torchrun_multi_node.sh [options]
#
# CKPT must be on storage every node sees (NFS, Lustre, ...): ranks write their own shards
# there and a restarted run reads them back, at the same or another world size.
# Environment as in torchrun_single_node.sh, plus NNODES, RDZV_ENDPOINT and RUN_ID (required).
set -euo pipefail
: "${NNODES:?set NNODES (or MIN:MAX for an elastic range)}"
: "${RDZV_ENDPOINT:?set RDZV_ENDPOINT=HOST:PORT}"
: "${RUN_ID:?set RUN_ID, the same on every node}"
PYTHON=${PYTHON:-python}
NPROC=${NPROC:-$("$PYTHON" -c "import torch; print(torch.cuda.device_count() or 2)")}
data_opts=()
for opt in ${DATA_OPTS:-preset=tiny}; do data_opts+=(--data-opt "$opt"); done

exec "$PYTHON" -m torch.distributed.run --nnodes "$NNODES" --nproc-per-node "$NPROC" \
    --rdzv-backend c10d --rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id "$RUN_ID" \
    --max-restarts "${MAX_RESTARTS:-3}" \
    -m autorec.cli train --arch "${ARCH:-dlrm}" --data "${DATA:-synthetic}" "${data_opts[@]}" \
    --checkpoint-dir "${CKPT:?set CKPT to a folder on shared storage}" "$@"
