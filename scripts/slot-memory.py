#!/usr/bin/env python3
"""RSS of a gateway whose plugin writes 64 MiB a call while it is hot-reloaded.

Usage: python3 scripts/slot-memory.py [GATEWAY_BINARY] [ROUNDS]
(defaults: target/release/wasmgate, 400). Needs the test fixtures built
(tests/plugins/target/wasm32-wasip2/release/{faulty,echo,minimal}.wasm: any cargo build).

Each round sends 16 calls at once (faulty__hog, which allocates until its memory limit,
and three small ones); every 10 rounds faulty.wasm is replaced by a copy with another custom
section (a new version, as a rebuild makes). Prints the gateway's RSS every 20 rounds and
after 3 s idle. Instance slots keep what their last call wrote (up to 16 MiB), so RSS
follows how many slots the gateway has used.
"""
import json, os, shutil, subprocess, sys, tempfile, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "target/release/wasmgate")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 400
fixtures = os.path.join(root, "tests/plugins/target/wasm32-wasip2/release")

def leb(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out

work = tempfile.mkdtemp(prefix="wasmgate-slots-")
plugins = os.path.join(work, "plugins")
os.mkdir(plugins)
for name in ("echo", "minimal", "faulty"):
    shutil.copy(os.path.join(fixtures, f"{name}.wasm"), plugins)
faulty = open(os.path.join(fixtures, "faulty.wasm"), "rb").read()
versions = []
for i in range(4):
    body = leb(1) + b"v" + bytes([i]) * 8
    versions.append(faulty + b"\0" + leb(len(body)) + body)
config = os.path.join(work, "gateway.toml")
with open(config, "w") as f:
    f.write(f'[gateway]\nshutdown_grace = "1s"\n[plugins]\ndir = "{plugins}"\ncache_dir = "{work}/cache"\n')

gw = subprocess.Popen([binary, "serve", "--config", config], stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

def send(message):
    gw.stdin.write((json.dumps(message) + "\n").encode())
    gw.stdin.flush()

def answer(id):
    while True:
        message = json.loads(gw.stdout.readline())
        if message.get("id") == id:
            return message

def rss_mib():
    for line in open(f"/proc/{gw.pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024

send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "slots", "version": "1"}}})
answer(0)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
answer(1)
tools = ["faulty__hog", "echo__echo", "minimal__echo", "faulty__ok"]
next_id = 10
for r in range(rounds):
    ids = set()
    for k in range(16):
        tool = tools[k % 4]
        arguments = {"text": "x"} if "echo" in tool else {}
        send({"jsonrpc": "2.0", "id": next_id, "method": "tools/call",
              "params": {"name": tool, "arguments": arguments}})
        ids.add(next_id)
        next_id += 1
    while ids:
        message = json.loads(gw.stdout.readline())
        ids.discard(message.get("id"))
    if r % 10 == 9:
        staged = os.path.join(work, "staged.wasm")
        open(staged, "wb").write(versions[(r // 10) % 4])
        os.rename(staged, os.path.join(plugins, "faulty.wasm"))
        time.sleep(0.5)
    if r % 20 == 19:
        print(f"round {r + 1}: RSS {rss_mib()} MiB", flush=True)
time.sleep(3)
print(f"after 3 s idle: RSS {rss_mib()} MiB", flush=True)
gw.stdin.close()
gw.wait(timeout=10)
shutil.rmtree(work, ignore_errors=True)
