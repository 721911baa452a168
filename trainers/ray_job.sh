#!/usr/bin/env bash
# Ray: submit the training as a Ray job; the driver runs Ray Train's TorchTrainer with WORKERS
# workers (one GPU each where the cluster has GPUs, else CPU workers over gloo).
#
#   RAY_ADDRESS=http://head:8265 bash trainers/ray_job.sh [more `autorec train` options]
#
# Without RAY_ADDRESS, `ray job submit` talks to a cluster on this machine (`ray start --head`).
# The working directory (this repository) is shipped to the cluster; the nodes need autorec's
# dependencies installed (or add them to the runtime env). CKPT must be on shared storage.
set -euo pipefail
data_opts=()
for opt in ${DATA_OPTS:-preset=tiny}; do data_opts+=(--data-opt "$opt"); done

exec ray job submit --working-dir . -- \
    python -m autorec.cli train --ray-workers "${WORKERS:-2}" --arch "${ARCH:-dlrm}" \
    --data "${DATA:-synthetic}" "${data_opts[@]}" --json "$@"
