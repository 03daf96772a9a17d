#!/usr/bin/env bash
# The gateway benchmark: builds the release binaries it measures, then runs
# `cargo bench --bench gateway` (benches/gateway.rs) with a low-priority spin loop
# on every core. Arguments go to the bench: --quick, --rounds N, --calls1 N,
# --calls16 N, --startups N. Results: stdout and target/bench-results.json.
#
# Why the spin loops: on these VMs a core that goes idle takes 15-30 us to wake,
# and every pipe hop pays that. A `nice -n 19` busy loop keeps each core awake and
# yields to the processes under test at once, so the figures measure the gateway,
# not the hypervisor's idle states. The bench's header says whether they ran.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== building release binaries (wasmgate, mcp_example_server) and the bench" >&2
cargo build --release --bin wasmgate --example mcp_example_server >&2
cargo bench --bench gateway --no-run >&2

spinners=()
stop_spinners() {
  if ((${#spinners[@]})); then
    kill "${spinners[@]}" 2>/dev/null || true
    wait "${spinners[@]}" 2>/dev/null || true
  fi
}
trap stop_spinners EXIT
trap 'exit 130' INT TERM

cores=$(nproc)
for _ in $(seq "$cores"); do
  nice -n 19 sh -c 'while :; do :; done' &
  spinners+=($!)
done
echo "== started ${#spinners[@]} low-priority spin loops (nice 19), one per core" >&2

WASMGATE_BENCH_SPIN=${#spinners[@]} cargo bench --bench gateway -- "$@"
