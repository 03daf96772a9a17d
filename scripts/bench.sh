#!/usr/bin/env bash
# The gateway benchmark: builds the release binaries it measures, then runs
# `cargo bench --bench gateway` (benches/gateway/) with a low-priority spin loop
# on every core. Arguments go to the bench: --quick, --rounds N, --calls1 N,
# --calls16 N, --startups N, --py-calls N, --reloads N, --only SECTION (calls,
# python, reload, startup, http, eras (a tools/call of 2025-11-25 against 2026-07-28 over
# HTTP, one gateway), instances, middleware (a pass-through chain of 1 and 3 links
# against none), remote, scale (100 servers of 114 tools:
# ready, the whole tools/list, a call, RSS, shutdown), or plugins for python, reload
# and startup; author, a plugin author's new-to-call and dev loop, runs only when named).
# Results: stdout and target/bench-results.json. The Python plugin section needs
# plugins/python/text/text.wasm (plugins/python/text/build.sh); without it, it is skipped.
#
# Why the spin loops: on these VMs a core that goes idle takes 15-30 us to wake,
# and every pipe hop pays that. A busy loop at nice 19 keeps each core awake and
# yields at once to the processes under test, so the figures measure the gateway,
# not the hypervisor's idle states. The bench's header says whether they ran.
#
# Where allowed (root or CAP_SYS_NICE), the bench and the processes it starts run at
# nice -10, so that other work on a shared machine (builds, tests) disturbs them less;
# WASMGATE_BENCH_NICE=0 turns that off. The header shows the nice value used.
#
# `bash scripts/bench.sh ab ARGS` runs benches/ab_latency.rs instead (an A/B of latency at
# 1 in flight across fresh processes; ARGS as its header says), under the same spin loops.
# `bash scripts/bench.sh load ARGS` runs scripts/http-load.py instead, without spin loops:
# 1,000 sessions calling for a minute while 5,000 idle and 100 slow-header connections are
# opened against the HTTP front, with its pass criteria (`--seconds 10` for a quick run).
# WASMGATE_BENCH_SPIN_LOOPS=0 starts none, for figures as on a client's machine.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== building release binaries (wasmgate, mcp_example_server) and the bench" >&2
cargo build --release --bin wasmgate --example mcp_example_server --example http_echo_server >&2
if [ "${1:-}" = load ]; then
  shift
  exec python3 scripts/http-load.py "$@"
fi
bench=gateway
if [ "${1:-}" = ab ]; then
  bench=ab_latency
  shift
fi
cargo bench --bench "$bench" --no-run >&2

spinners=()
stop_spinners() {
  if ((${#spinners[@]})); then
    kill "${spinners[@]}" 2>/dev/null || true
    wait "${spinners[@]}" 2>/dev/null || true
  fi
}
trap stop_spinners EXIT
trap 'exit 130' INT TERM

# `nice -n` is relative: the spin loops go to nice 19 whatever this script's nice is.
spin_nice=$((19 - $(nice)))
cores=$(nproc)
for _ in $(seq "${WASMGATE_BENCH_SPIN_LOOPS:-$cores}"); do
  nice -n "$spin_nice" sh -c 'while :; do :; done' &
  spinners+=($!)
done
echo "== started ${#spinners[@]} spin loops at nice 19 ($cores cores)" >&2

bench_nice=${WASMGATE_BENCH_NICE:--10}
priority=()
if [ "$bench_nice" != 0 ] && nice -n "$bench_nice" true 2>/dev/null; then
  priority=(nice -n "$bench_nice")
fi
WASMGATE_BENCH_SPIN=${#spinners[@]} "${priority[@]}" cargo bench --bench "$bench" -- "$@"
# The README's plot (docs/bench.svg), from the results of the calls and http sections.
if [ "$bench" = gateway ]; then
  python3 scripts/plot.py
fi
