#!/usr/bin/env bash
# Ray: the training runs as Ray Train's TorchTrainer with WORKERS workers (one GPU each where the
# cluster has GPUs, else CPU workers over gloo), placed by PLACEMENT (PACK fills a node first;
# STRICT_SPREAD puts each worker on its own node).
#
#   RAY_ADDRESS=http://head:8265 bash trainers/ray_job.sh [more `autorec train` options]
#       submits it as a Ray job (the job server of `ray[default]`; the working directory, this
#       repository, is shipped to the cluster);
#   RAY_ADDRESS=head:6379 bash trainers/ray_job.sh [...]
#       runs the driver here, on a node of the cluster (or a machine that reaches its GCS port),
#       as tests/study/test_ray_cluster.py does on a two-node cluster on localhost.
#
# The nodes need autorec's dependencies installed. CKPT (optional) and STORAGE (where Ray Train
# keeps the run) must be on storage every node sees.
set -euo pipefail
: "${RAY_ADDRESS:?set RAY_ADDRESS (http://HEAD:8265 for a job, HEAD:PORT to run the driver here)}"
PYTHON=${PYTHON:-python}
data_opts=()
for opt in ${DATA_OPTS:-preset=tiny}; do data_opts+=(--data-opt "$opt"); done
train=(-m autorec.cli train --ray-workers "${WORKERS:-2}" --ray-placement "${PLACEMENT:-PACK}"
       --arch "${ARCH:-dlrm}" --data "${DATA:-synthetic}" "${data_opts[@]}" --json)
[[ -n "${CKPT:-}" ]] && train+=(--checkpoint-dir "$CKPT")
[[ -n "${STORAGE:-}" ]] && train+=(--ray-storage "$STORAGE")

if [[ "$RAY_ADDRESS" == http://* || "$RAY_ADDRESS" == https://* ]]; then
    exec ray job submit --working-dir . -- python "${train[@]}" "$@"
fi
exec "$PYTHON" "${train[@]}" --ray-address "$RAY_ADDRESS" "$@"
