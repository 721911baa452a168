#!/usr/bin/env bash
# Create or update the virtualenv with autorec and its pinned stack (constraints.txt).
# Idempotent: a stamp records what was installed; a second run with nothing changed is instant.
# Usage: tools/install.sh [EXTRAS]   (default extras: search,ray,test)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
python=${PYTHON:-python3}
extras=${1:-search,ray,test}
stamp="$venv/.autorec-installed"
want="$(cat constraints.txt pyproject.toml tools/install.sh | sha256sum | cut -d' ' -f1) $extras"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
pin() {  # the pinned requirement for a distribution, from the one place pins live
  grep -iE "^$1==" constraints.txt | head -n 1 || { echo "install: $1 is not pinned in constraints.txt" >&2; exit 1; }
}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
# A machine whose pip config names a local package index (extra-index-url = file:///...) makes
# pip warn once per project that index lacks ("Location ... is ignored: it is neither a file nor
# a directory"), dozens of lines that read like a broken install. They say nothing about this
# install, so they are dropped; every other line of pip's output stays.
install() {
  "${pip[@]}" "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
echo "install: torch and fbgemm into $venv"
install "$(pin torch)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  # A GPU: the CUDA fbgemm-gpu of the release that matches the pinned torch and torchrec.
  fbgemm_version=$(pin fbgemm-gpu-cpu | cut -d= -f3)
  install -c constraints.txt "fbgemm-gpu==$fbgemm_version"
else
  install -c constraints.txt "$(pin fbgemm-gpu-cpu)"
fi
echo "install: autorec[$extras]"
install -c constraints.txt -e ".[$extras]"
# torchrec's metadata asks for the CUDA fbgemm-gpu, and recbole's for a whole training stack we
# never import (we only read the MovieLens files it ships): both go in without their deps, last,
# so that no later install reports their unmet requirements as conflicts (pip checks conflicts
# only when it resolves dependencies, which --no-deps skips).
echo "install: torchrec and recbole (without their dependencies)"
install --no-deps "$(pin torchrec)" "$(pin recbole)"
"$venv/bin/python" -c "import torchrec, fbgemm_gpu, autorec.data.movielens as m; m.locate()"
echo "$want" > "$stamp"
echo "install: done"
