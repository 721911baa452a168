#!/usr/bin/env bash
# Run a one-shot variant of benchmarks/oneshot_vs_tpe.py seed by seed, each seed alone (so the
# seeds' clocks do not share the cores), each to the end of its study (the winner's final training
# included). A seed whose run dies (a kill, a lost machine) is run again: the study resumes from its
# storage and its supernet from its checkpoint. Progress goes to the log, one per variant.
#
#   bash benchmarks/until_final.sh k40 0 1 2                    # seeds 0, 1 and 2 of variant k40
#   EXTRA="--supernet-from none" bash benchmarks/until_final.sh k40 0 1 2
#
# RUN_DIR: the checkout to run from (default: this one), so a run can go on from a worktree of a
# fixed commit while the main checkout changes; LOG_DIR: where the logs go (default ~/runs);
# TRIES: runs a seed gets before the script gives up on it (default 3); UNITS=1: the reference
# training timed right before and right after each seed's run, as that seed's own TE unit
# (benchmarks/adjacent_units.py; a failed timing is logged and the seed runs on).
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 VARIANT SEED [SEED ...]  (e.g. $0 k40 0 1 2)" >&2
    exit 2
fi
variant=$1; shift
run_dir=${RUN_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
log_dir=${LOG_DIR:-$HOME/runs}
tries=${TRIES:-3}
mkdir -p "$log_dir"
log="$log_dir/${variant}_all.log"
status=0
unit() {  # unit SEED WHEN: the seed's TE unit timed now (UNITS=1)
    [ "${UNITS:-0}" = 1 ] || return 0
    # shellcheck disable=SC2086
    (cd "$run_dir" && .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage unit --when "$2" \
        --variant "$variant" --seeds "$1" ${EXTRA:-}) >> "$log" 2>&1 \
        || echo "=== $(date -Is) $variant seed $1: the unit $2 its run failed" >> "$log"
}
for seed in "$@"; do
    done_seed=0
    unit "$seed" before
    for try in $(seq 1 "$tries"); do
        echo "=== $(date -Is) $variant seed $seed, run $try of $tries, from $run_dir" >> "$log"
        # shellcheck disable=SC2086  # EXTRA holds several flags
        if (cd "$run_dir" && .venv/bin/python -m benchmarks.oneshot_vs_tpe --stage oneshot \
                --variant "$variant" --seeds "$seed" ${EXTRA:-}) >> "$log" 2>&1; then
            done_seed=1
            unit "$seed" after
            break
        fi
        echo "=== $(date -Is) $variant seed $seed: run $try failed" >> "$log"
    done
    if [ "$done_seed" = 0 ]; then
        echo "=== $variant seed $seed: gave up after $tries runs" >> "$log"
        status=1
    fi
done
echo "=== $(date -Is) $variant: done (status $status)" >> "$log"
exit "$status"
