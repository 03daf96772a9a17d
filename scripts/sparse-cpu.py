#!/usr/bin/env python3
"""The gateway's CPU, by thread, for plugin calls that come one at a time with pauses
between them (as an agent's do), and while idle after a burst.

Usage: python3 scripts/sparse-cpu.py [GATEWAY_BINARY] [PAUSE_MS] [CALLS]
(defaults: target/release/wasmgate, 50, 40). Needs tests/plugins/target/wasm32-wasip2/
release/minimal.wasm (any cargo build of the test fixtures).

Starts the gateway with `--plugin minimal.wasm`, makes 2,000 calls back to back, then
prints the CPU the gateway used in the 3 s after them (idle), and the CPU per call, by
thread, of CALLS calls PAUSE_MS apart. Figures come from /proc/PID/task/*/schedstat
(time on CPU, ns). Linux only.
"""
import json, os, subprocess, sys, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "target/release/wasmgate")
pause = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.05
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 40
plugin = os.path.join(root, "tests/plugins/target/wasm32-wasip2/release/minimal.wasm")

gateway = subprocess.Popen([binary, "--plugin", plugin], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def send(message):
    gateway.stdin.write((json.dumps(message) + "\n").encode())
    gateway.stdin.flush()


def answer():
    line = gateway.stdout.readline()
    if not line:
        sys.exit("the gateway closed its stdout")
    return json.loads(line)


def call(id):
    send({"jsonrpc": "2.0", "id": id, "method": "tools/call",
          "params": {"name": "minimal__echo", "arguments": {"text": "hi"}}})
    reply = answer()
    if "result" not in reply or reply["result"].get("isError"):
        sys.exit(f"the call failed: {reply}")


def cpu_by_thread():
    """ns on CPU so far, by thread name (threads of one name summed)."""
    tasks = f"/proc/{gateway.pid}/task"
    by_name = {}
    for tid in os.listdir(tasks):
        try:
            with open(f"{tasks}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{tasks}/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except FileNotFoundError:
            continue
        by_name[name] = by_name.get(name, 0) + ns
    return by_name


send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "sparse-cpu", "version": "1"}}})
answer()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for id in range(1, 2001):
    call(id)

time.sleep(0.5)
before = cpu_by_thread()
time.sleep(3)
after = cpu_by_thread()
idle_ms = (sum(after.values()) - sum(before.values())) / 1e6
print(f"idle, the 3 s after 2,000 calls: {idle_ms:.2f} ms of CPU")

before = cpu_by_thread()
for id in range(3000, 3000 + calls):
    call(id)
    time.sleep(pause)
after = cpu_by_thread()
per_call = {name: (after[name] - before.get(name, 0)) / 1e3 / calls for name in after}
total = sum(per_call.values())
threads = ", ".join(f"{name} {us:.0f}" for name, us in sorted(per_call.items()) if us >= 0.5)
print(f"{calls} calls {pause * 1000:.0f} ms apart: {total:.0f} µs of CPU per call ({threads})")
gateway.stdin.close()
gateway.wait()
