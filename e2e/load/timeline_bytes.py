#!/usr/bin/env python3
"""Bytes per change of the history, as stored: the simulator plays the operators' pipeline on the
demo fleet at STEPS steps per second for SECONDS seconds; the timeline's tables (versions,
checkpoints, object names) and the event log are measured on disk before and after, on SQLite
(dbstat: the pages each table and index takes) or on PostgreSQL (pg_total_relation_size).

    e2e/load/timeline_bytes.py BIN [sqlite|postgres] [SECONDS] [STEPS]

Prints one line per part and the bytes per change of each; numbers go into BENCHMARKS.md.
"""
import json, os, signal, socket, sqlite3, subprocess, sys, tempfile, time, urllib.request

BIN = sys.argv[1]
ENGINE = sys.argv[2] if len(sys.argv) > 2 else "sqlite"
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 60
STEPS = sys.argv[4] if len(sys.argv) > 4 else "20"
PARTS = {
    "timeline versions": ["timeline_versions"],
    "timeline checkpoints": ["timeline_checkpoints", "timeline_checkpoints_at"],
    "datacenter states": ["datacenter_states", "datacenter_states_at"],
    "event log": ["events", "events_identity", "events_object", "events_at", "events_type", "sqlite_autoindex_events_1"],
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def gql(port, q):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", json.dumps({"query": q}).encode(),
                                 {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=30))


work = tempfile.mkdtemp(prefix="timeline-bytes-")
if ENGINE == "sqlite":
    path = os.path.join(work, "h.db")
    url = f"sqlite:{path}"
else:
    name = f"timeline_bytes_{os.getpid()}"
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {name}"], check=True)
    url = f"postgres://postgres@127.0.0.1:5432/{name}"


def sizes():
    if ENGINE == "sqlite":
        c = sqlite3.connect(path)
        rows = dict(c.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
        versions = c.execute("SELECT count(*) FROM timeline_versions").fetchone()[0]
        events = c.execute("SELECT count(*) FROM events").fetchone()[0]
        c.close()
    else:
        def q(sql):
            return subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", name, "-Atc", sql],
                                  check=True, capture_output=True, text=True).stdout.strip()
        rows = {}
        for tables in PARTS.values():
            for t in tables:
                out = q(f"SELECT COALESCE(pg_relation_size(to_regclass('{t}')), 0)")
                rows[t] = int(out or 0)
        # TOAST and free-space maps count too: the whole relation with its indexes.
        for t in ["timeline_versions", "timeline_checkpoints", "datacenter_states", "events"]:
            rows[t] = int(q(f"SELECT pg_total_relation_size('{t}') - pg_indexes_size('{t}')"))
        versions = int(q("SELECT count(*) FROM timeline_versions"))
        events = int(q("SELECT count(*) FROM events"))
    out = {part: sum(rows.get(t, 0) or 0 for t in tables) for part, tables in PARTS.items()}
    return out, versions, events


port = free_port()
env = dict(os.environ, PORT=str(port), DATABASE_URL=url, SIMULATE="true", SIMULATE_STEPS_PER_SECOND=STEPS,
           ANONYMOUS_READ_FROM="127.0.0.0/8", LOG_LEVEL="warn", HISTORY_MAX_BYTES="0")
server = subprocess.Popen([BIN, "serve", "--demo"], env=env, stdout=subprocess.DEVNULL)
try:
    deadline = time.time() + 120
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2).status == 200:
                break
        except Exception:
            pass
        assert time.time() < deadline, "the server never became ready"
        time.sleep(0.2)
    objects = gql(port, "{ machines(first:1){totalCount} clusters(first:1){totalCount} hosts(first:1){totalCount} }")
    time.sleep(5)  # the demo's load written, its checkpoint taken
    before, v0, e0 = sizes()
    time.sleep(SECONDS)
    after, v1, e1 = sizes()
finally:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
if ENGINE != "sqlite":
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE {name}"], check=False)
changes = v1 - v0
print(f"engine {ENGINE}, {SECONDS:.0f} s at {STEPS} steps/s: {changes} changes ({changes / SECONDS:.1f}/s), "
      f"{e1 - e0} event rows; fleet {json.dumps(objects['data'])}")
total = 0
for part in PARTS:
    grew = after[part] - before[part]
    if part != "event log":
        total += grew
    print(f"  {part:24s} {grew:>12,d} bytes  {grew / max(changes, 1):8.1f} B/change")
print(f"  {'timeline in all':24s} {total:>12,d} bytes  {total / max(changes, 1):8.1f} B/change")
ev = after["event log"] - before["event log"]
print(f"  {'timeline + event log':24s} {total + ev:>12,d} bytes  {(total + ev) / max(changes, 1):8.1f} B/change")
