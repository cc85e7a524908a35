"""The small program the tool runs inside a target: `python3 -c <this file's text> OP ARGS...`.

Standard library only (the target has its own Python, not ours). Fixed text; every value arrives as
an argv item or as JSON on stdin, so no shell string is ever built from user input. Ops:

- `start DIR`, stdin `{"argv": [...], "env": {...}, "tag": ID}`: start the server detached from the
  caller (a double fork, `setsid`, stdio to `DIR/server.log`), with `AUTOTUNE_TRIAL_ID=ID` and
  `SPT_NOENV=1` in its environment. A waiter (the session leader) records the exit status in
  `DIR/exit.json`; it is not tagged, so a stop by tag leaves it to record what the stop did, and it
  ends with the server it waits on (it holds nothing a sweep must free). Prints `{"pid": server pid}`
  or `{"error": ...}`. Survives a dropped connection.
  A DIR left by an earlier run of the same id (regress reuses its ids) is emptied first, unless
  something tagged ID still runs (then an error: its log and pid must not be mixed with ours).
- `clean DIR TAG`: remove DIR once nothing tagged TAG runs; `{"removed": bool, "running": [...]}`.
- `launcher ARGV0 [MODULE [DRIVER]]`: can ARGV0 run here, and does it import MODULE (for `python -m
  MODULE`)? `{"exe": path|null, "module": bool|null, "detail": str}`; nothing is started but that import
  check, bounded by PROBE_TIMEOUT_S. With DRIVER "1" also `"driver": {"real_driver": bool, "stand_in":
  dir|null, "ld_library_path": str}`: whether a real `libcuda.so.1` loads here (the tool's own no-driver
  stand-in does not count), the stand-in's folder beside ARGV0's environment (`<env>/bin/python` ->
  `<env>/nodriver/libcuda.so.1`, as `autotune.engines.sglang.cpu` looks for it here), and this side's
  LD_LIBRARY_PATH (a server started here inherits it: the tool puts the stand-in ahead of it).
- `hostmem READING CGROUP TITLES MODULES`, stdin the text of the tool's `autotune/gpu/hostread.py` (host
  memory's arithmetic, standard library only): its `host_reading(READING, CGROUP == "1", TITLES, MODULES)`
  run here, host memory as the engine reads it (READING "node" or "psutil"), with the engine's processes
  (comma-separated process titles and server modules, from its adapter) under this side's PIDs. The tool sends that fixed text (this
  program knows nothing of GPUs), so both sides compute a figure with the same code.
- `follow DIR OFFSET`: copy `DIR/server.log` from byte OFFSET to stdout as it grows; exit 0 once the
  server has exited and the log is drained.
- `status DIR`: `{"running": bool, "pid": int|null, "exit_code": int|null}`.
- `stop TAG GRACE_S KILL_NOW`: TERM every process tagged TAG, wait up to GRACE_S, KILL what is left,
  look again; prints `{"terminated": [...], "killed": [...], "left": [...]}`. Found by tag only, never
  by name. With the text of the tool's `autotune/trial/shm.py` on stdin, the /dev/shm segments those
  processes map are noted before any signal and, once they are gone, those no live process maps are
  removed (`shm.mapped_by`, `shm.remove_unmapped`), as a local stop does: `"shm_removed": [names]`.
- `shmsweep AGE_S PATTERNS TITLES MODULES`, stdin `{"shm": text, "hostread": text}` (the tool's
  `autotune/trial/shm.py` and `autotune/gpu/hostread.py`): what an engine leaves in /dev/shm unmapped
  (comma-separated globs, its adapter's `shm_leftovers`), created in the last AGE_S seconds (an age, not
  an epoch: the two clocks may differ), removed by `shm.sweep_leftovers` unless a process of that engine
  (`hostread.server_matcher(TITLES, MODULES)`) runs here; `{"removed": [names]}`.
- `list TAG`: `[{"pid": ..., "argv": [...]}]` of the live processes tagged TAG.
- `workers TAG MIN_BYTES`, stdin the text of `autotune/gpu/hostread.py`: `{"PID": title}` of the live
  processes tagged TAG whose resident set is at least MIN_BYTES (`hostread.resident_bytes`), as a local
  `Supervisor.workers` reads its group: the server's working processes, for a trial that finds one gone.
- `oomkills`, stdin the same text: `{"oom_kills": n|null}`, the kernel's count of its OOM kills as this
  side reads it (`hostread.oom_kills`; a container reads its host's).
- `argv PID`: the process's argv, null when it is gone. `port HOST PORT`: `{"in_use": bool}`.
- `netns`: `{"net": "net:[inode]"|null}`, this side's network namespace (is it the host's?).
- `relay HOST PORT`: carry TCP connections to HOST:PORT here over stdin/stdout (frames, below)
  until stdin closes. The tool's side is `autotune.target.relay`.
- `logcopy DIR HEAD TAIL`: `DIR/server.log` as raw bytes: all of it, or its first HEAD and last
  TAIL bytes with a marker line between.

Every run first writes STARTED_MARK to stderr: a failure with it is this program's own (its
traceback follows), one without it is the way in (ssh, the prefix, a container not running).
"""

import ctypes
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

TAG_ENV = "AUTOTUNE_TRIAL_ID"
STARTED_MARK = "autotune-helper: started"
PROBE_TIMEOUT_S = 40  # the launcher's import check; well inside the tool's wait for this op (LAUNCHER_WAIT_S)
STAND_IN, STAND_IN_DIR = "libcuda.so.1", "nodriver"  # autotune.engines.sglang.cpu's names
FRAME = struct.Struct(">IBI")  # channel, kind, payload bytes
OPEN, DATA, EOF, HELLO = 0, 1, 2, 3


def tagged(tag):
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and (TAG_ENV + "=" + tag).encode() in env:
            found.append(int(name))
    return found


def cmdline(pid):
    """The argv of `pid`, or None when it is gone (it may exit while we look)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0")[:-1]]
    except OSError:
        return None


def start(run_dir):
    doc = json.load(sys.stdin)
    if os.path.isdir(run_dir):
        running = tagged(doc["tag"])
        if running:
            print(json.dumps({"error": f"processes tagged {doc['tag']} still run there: {running}"}))
            return
        shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir, exist_ok=True)
    pid_file, exit_file = os.path.join(run_dir, "server.pid"), os.path.join(run_dir, "exit.json")
    env = dict(os.environ, **doc["env"], **{TAG_ENV: doc["tag"], "SPT_NOENV": "1"})
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        waiter(doc["argv"], env, run_dir, pid_file, exit_file)
        os._exit(0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for path in (pid_file, exit_file):
            if os.path.exists(path):
                with open(path) as fh:
                    text = fh.read()
                if text.endswith("\n"):
                    print(json.dumps({"pid": int(text)} if path == pid_file else json.loads(text)))
                    return
        time.sleep(0.01)
    print(json.dumps({"error": "the server did not start within 30 s"}))


def waiter(argv, env, run_dir, pid_file, exit_file):
    # Untagged (its /proc environ is the helper's): tagged, every stop would kill it before it wrote
    # the exit status, and every stopped server's status would be unknown.
    null = os.open(os.devnull, os.O_RDWR)
    log = os.open(os.path.join(run_dir, "server.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd in (0, 1, 2):
        os.dup2(null if fd == 0 else log, fd)
    try:
        proc = subprocess.Popen(argv, env=env, close_fds=True)
    except OSError as exc:
        _write(exit_file, {"error": f"cannot start {argv[0]!r}: {exc.strerror or exc}"})
        return
    _write(pid_file, proc.pid)
    _write(exit_file, {"exit_code": proc.wait()})


def _write(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(json.dumps(value) + "\n")
    os.replace(tmp, path)


def status(run_dir):
    doc: dict = {"running": False, "pid": None, "exit_code": None}
    try:
        with open(os.path.join(run_dir, "exit.json")) as fh:
            doc.update(json.load(fh))
    except OSError:
        doc["running"] = True
    try:
        with open(os.path.join(run_dir, "server.pid")) as fh:
            doc["pid"] = int(fh.read())
    except (OSError, ValueError):
        pass
    doc["running"] = doc["running"] and doc["pid"] is not None and alive(doc["pid"])
    return doc


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def follow(run_dir, offset):
    path, out = os.path.join(run_dir, "server.log"), sys.stdout.buffer
    pid = status(run_dir)["pid"]
    while True:
        # look first, then drain: nothing is lost. The server gone counts as done even without
        # exit.json: its waiter writes it only after reaping it, and dies with it when killed from outside.
        done = os.path.exists(os.path.join(run_dir, "exit.json")) or (pid is not None and not alive(pid))
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read(1 << 20)
        except OSError:
            chunk = b""
        if chunk:
            out.write(chunk)
            out.flush()
            offset += len(chunk)
        elif done:
            return
        else:
            time.sleep(0.03)


def stop(tag, grace_s, kill_now, shm=None):
    report: dict = {"terminated": [], "killed": []}
    pids = tagged(tag)
    segments = shm["mapped_by"](pids) if shm and pids else set()  # what only they could unlink
    if pids and not kill_now:
        report["terminated"] = _signal(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
    for _ in range(5):  # a straggler may fork while we look; look again
        left = tagged(tag)
        if not left:
            break
        report["killed"] += _signal(left, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while set(tagged(tag)) & set(left) and time.monotonic() < deadline:
            time.sleep(0.02)
    report["left"] = tagged(tag)
    if segments:
        report["shm_removed"] = shm["remove_unmapped"](segments)
    return report


def shm_sweep(age_s, patterns, titles, modules, sources):
    shm, hostread = load(sources["shm"], "shm"), load(sources["hostread"], "hostread")
    others = hostread["proc_processes"](hostread["server_matcher"](titles, modules))
    return {"removed": shm["sweep_leftovers"](patterns, time.time() - age_s, others_running=bool(others))}


def load(text, name):
    """The namespace of a module of the tool's, run from the `text` it sent."""
    space: dict = {"__name__": name}
    exec(compile(text, name + ".py", "exec"), space)
    return space


def _items(arg):
    return arg.split(",") if arg else []


def _signal(pids, sig):
    sent = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except OSError:
            pass
    return sent


def port_in_use(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
            return False
        except OSError:
            return True


def workers(tag, min_bytes, hostread):
    out = {}
    for pid in tagged(tag):
        held, argv = hostread["resident_bytes"](pid), cmdline(pid)
        if held is not None and held >= min_bytes and argv:
            out[str(pid)] = " ".join(argv).strip()[:80]
    return out


def clean(run_dir, tag):
    running = tagged(tag)
    if running:
        return {"removed": False, "running": running}
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"removed": not os.path.exists(run_dir), "running": []}


def launcher(argv0, module):
    exe = shutil.which(argv0)
    if exe is None:
        return {"exe": None, "module": None, "detail": f"{argv0!r} is not an executable here (PATH={os.environ.get('PATH', '')})"}
    if not module:
        return {"exe": exe, "module": None, "detail": ""}
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)"
    try:
        done = subprocess.run([exe, "-c", probe, module], capture_output=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"exe": exe, "module": False, "detail": f"{exe} did not answer an import check of {module} within "
                f"{PROBE_TIMEOUT_S} s"}
    except OSError as exc:
        return {"exe": exe, "module": False, "detail": str(exc)}
    return {"exe": exe, "module": done.returncode == 0, "detail": done.stderr.decode(errors="replace")[-300:]}


def driver(argv0):
    """Whether a real libcuda.so.1 loads here, where the stand-in is beside ARGV0, and LD_LIBRARY_PATH."""
    folder = None
    if "/" in argv0:  # `<env>/bin/python` -> `<env>/nodriver`, the link not resolved (a venv's python is one)
        candidate = os.path.abspath(os.path.join(os.path.dirname(os.path.dirname(argv0)), STAND_IN_DIR))
        folder = candidate if os.path.isfile(os.path.join(candidate, STAND_IN)) else None
    return {"real_driver": real_driver_loads(), "stand_in": folder,
            "ld_library_path": os.environ.get("LD_LIBRARY_PATH", "")}


def real_driver_loads():
    """A `libcuda.so.1` loads here and is not the tool's stand-in (which names itself in its error text).
    The same test as `autotune.engines.sglang.cpu.real_driver_loads`, written again: this program runs in
    the target on its own, importing nothing of the tool."""
    try:
        lib = ctypes.CDLL(STAND_IN)
    except OSError:
        return False
    try:
        get = lib.cuGetErrorString
    except AttributeError:
        return True
    get.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    text = ctypes.c_char_p()
    get(100, ctypes.byref(text))
    return b"autotune" not in (text.value or b"")


def netns():
    try:
        return {"net": os.readlink("/proc/self/ns/net")}
    except OSError:
        return {"net": None}


def logcopy(run_dir, head, tail):
    out = sys.stdout.buffer
    with open(os.path.join(run_dir, "server.log"), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= head + tail:
            out.write(fh.read(size))
            return
        out.write(fh.read(head))
        out.write(b"\n[autotune: %d bytes of the log left out here]\n" % (size - head - tail))
        fh.seek(size - tail)
        out.write(fh.read(tail))


def relay(host, port):
    """Frames both ways: FRAME header then payload. The tool sends OPEN (connect a channel), DATA
    and EOF (its client closed its writing side); this side answers DATA and EOF (the server's
    side closed, or it could not be reached). A channel ends when both sides said EOF. HELLO first:
    the relay runs. Ends, with every connection, when stdin closes (the tool, or its ssh, is gone)."""
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, None)
    socks: dict = {}
    eofs: dict = {}
    buf = b""
    _frame(0, HELLO, b"")
    while True:
        for key, _ in sel.select():
            if key.data is not None:
                _from_server(sel, socks, eofs, key.data)
                continue
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return
            buf += chunk
            while len(buf) >= FRAME.size:
                chan, kind, size = FRAME.unpack_from(buf)
                if len(buf) < FRAME.size + size:
                    break
                payload, buf = buf[FRAME.size:FRAME.size + size], buf[FRAME.size + size:]
                _to_server(sel, socks, eofs, chan, kind, payload, host, port)


def _frame(chan, kind, payload):
    data = FRAME.pack(chan, kind, len(payload)) + payload
    while data:
        data = data[os.write(1, data):]


def _to_server(sel, socks, eofs, chan, kind, payload, host, port):
    if kind == OPEN:
        try:
            sock = socket.create_connection((host, port), timeout=10)
        except OSError:
            _frame(chan, EOF, b"")  # nobody listens (yet): the client sees the connection closed
            return
        sock.settimeout(None)
        socks[chan], eofs[chan] = sock, 0
        sel.register(sock, selectors.EVENT_READ, chan)
        return
    sock = socks.get(chan)
    if sock is None:
        return  # a channel already ended here (its server side failed)
    try:
        if kind == DATA:
            sock.sendall(payload)
            return
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    _ended(sel, socks, eofs, chan)


def _from_server(sel, socks, eofs, chan):
    sock = socks[chan]
    try:
        data = sock.recv(1 << 16)
    except OSError:
        data = b""
    if data:
        _frame(chan, DATA, data)
        return
    sel.unregister(sock)
    _frame(chan, EOF, b"")
    _ended(sel, socks, eofs, chan)


def _ended(sel, socks, eofs, chan):
    eofs[chan] += 1
    if eofs[chan] >= 2:
        sock = socks.pop(chan)
        eofs.pop(chan)
        try:
            sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()


def main(argv):
    sys.stderr.write(STARTED_MARK + "\n")
    sys.stderr.flush()
    op, args = argv[0], argv[1:]
    if op == "start":
        start(args[0])
    elif op == "follow":
        follow(args[0], int(args[1]))
    elif op == "relay":
        relay(args[0], int(args[1]))
    elif op == "logcopy":
        logcopy(args[0], int(args[1]), int(args[2]))
    else:
        if op == "status":
            doc = status(args[0])
        elif op == "stop":
            source = sys.stdin.read()
            doc = stop(args[0], float(args[1]), args[2] == "1", load(source, "shm") if source else None)
        elif op == "shmsweep":
            doc = shm_sweep(float(args[0]), _items(args[1]), _items(args[2]), _items(args[3]), json.load(sys.stdin))
        elif op == "list":
            doc = [{"pid": p, "argv": a} for p, a in ((p, cmdline(p)) for p in tagged(args[0])) if a is not None]
        elif op == "workers":
            doc = workers(args[0], int(args[1]), load(sys.stdin.read(), "hostread"))
        elif op == "oomkills":
            doc = {"oom_kills": load(sys.stdin.read(), "hostread")["oom_kills"]()}
        elif op == "argv":
            doc = cmdline(int(args[0]))
        elif op == "clean":
            doc = clean(args[0], args[1])
        elif op == "launcher":
            doc = launcher(args[0], args[1] if len(args) > 1 else "")
            if args[2:3] == ["1"]:
                doc["driver"] = driver(args[0])
        elif op == "hostmem":
            hostread = load(sys.stdin.read(), "hostread")
            split = [_items(a) for a in (args[2:4] + ["", ""])[:2]]
            doc = hostread["host_reading"](args[0], args[1] == "1", split[0], split[1])
        elif op == "port":
            doc = {"in_use": port_in_use(args[0], int(args[1]))}
        elif op == "netns":
            doc = netns()
        else:
            raise SystemExit(f"unknown op {op!r}")
        print(json.dumps(doc))


if __name__ == "__main__":
    main(sys.argv[1:])
