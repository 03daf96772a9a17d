#!/usr/bin/env bash
# Builds text.wasm, a wasmgate plugin written in Python, with componentize-py.
# componentize-py bundles a whole CPython build, so the component is large
# (tens of MB) and takes a while to compile the first time the gateway loads it
# (after that wasmgate's compilation cache makes loading quick).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../wit"
# Pinned: the version this plugin was built and checked with.
version="0.25.1"

cpy="$(command -v componentize-py || true)"
if [[ -z "$cpy" ]]; then
    user_bin="$(python3 -m site --user-base)/bin"
    if [[ ! -x "$user_bin/componentize-py" ]]; then
        echo "installing componentize-py $version into the user environment" >&2
        python3 -m pip install --user --quiet "componentize-py==$version"
    fi
    cpy="$user_bin/componentize-py"
fi

cd "$here"
"$cpy" -d "$wit" -w plugin componentize app -o text.wasm
ls -l text.wasm
