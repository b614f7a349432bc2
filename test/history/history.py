#!/usr/bin/python3
"""Randomized histories of fenced writes, and a checker for them.

N client processes (default 8) each run M operations against a few
resources.  An operation takes a token from a pluggable source, sometimes
stalls (sleeps past its lease, or is stopped with SIGSTOP and resumed by the
parent), then writes through fence_guard tables and, in the same
transaction, appends one row per fenced row written to a log table.  Each
client records the outcome of every operation in a local file (JSON lines),
in particular every COMMIT it saw succeed.

The checker reads the log ordered by commit (track_commit_timestamp) and
verifies, per resource, that tokens never decrease; that no token was
issued to two acquisitions (written or not); that every write whose
COMMIT a client saw succeed is present, and that no write the database
rejected is; that every resource's mark is the highest token in the log;
and that the final rows are those the last committed writes left.

    history.py setup [--guard fence|broken] [--resources 3]
    history.py run   --outdir DIR [--clients 8] [--ops 40] [--source seq|redis] ...
    history.py check --outdir DIR [--expect-violations]
    history.py all   --outdir DIR ...           (setup, run, check)
    history.py all --long ...                   (10,000+ operations)

Connection parameters come from libpq's environment (PGHOST, PGPORT,
PGDATABASE, ...) or --dsn.  Exit status of check and all: 0 when the
history is clean (or, with --expect-violations, when violations were
found), 1 otherwise.
"""
import argparse
import ctypes
import glob
import json
import os
import random
import signal
import sys
import time

import psycopg2
import psycopg2.extensions

# ----------------------------------------------------------------- schema

SCHEMA_COMMON = """
DROP TABLE IF EXISTS hist_items, hist_events, hist_log, broken_marks CASCADE;
DROP SEQUENCE IF EXISTS hist_tokens;
DROP FUNCTION IF EXISTS broken_guard() CASCADE;
CREATE SEQUENCE hist_tokens;
-- the rows the clients write: one resource per res_id, shared by two tables
CREATE TABLE hist_items (
    res_id int NOT NULL,
    k      int NOT NULL,
    val    text NOT NULL,
    tok    fence_token,
    PRIMARY KEY (res_id, k)
);
CREATE TABLE hist_events (
    id     bigserial PRIMARY KEY,
    res_id int NOT NULL,
    val    text NOT NULL,
    tok    fence_token
);
-- one row per fenced row written, in the writing transaction; not fenced
CREATE TABLE hist_log (
    id       bigserial PRIMARY KEY,
    run      text NOT NULL,
    client   int NOT NULL,
    op       int NOT NULL,
    resource text NOT NULL,
    tbl      text NOT NULL,
    k        bigint NOT NULL,
    kind     text NOT NULL,
    val      text,
    token    bigint NOT NULL,
    txid     bigint NOT NULL DEFAULT txid_current(),
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

SCHEMA_FENCE = """
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON hist_items
    FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'res:{res_id}');
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON hist_events
    FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'res:{res_id}');
"""

# A deliberately broken guard: it reads the mark WITHOUT locking it, sleeps
# a little (as a busy server might), compares, then overwrites the mark
# blindly.  Two writers of one resource both read the old mark, both pass,
# and the one with the LOWER token may commit last.  The checker must
# report that as a violation.
SCHEMA_BROKEN = """
CREATE TABLE broken_marks (resource text PRIMARY KEY, token bigint NOT NULL);
CREATE FUNCTION broken_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r text;
    t bigint;
    m bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := 'res:' || OLD.res_id;
    ELSE
        r := 'res:' || NEW.res_id;
        t := NEW.tok::bigint;
    END IF;
    IF t IS NULL THEN
        SELECT d.token::bigint INTO t FROM fence_declared() d
         WHERE d.resource = r ORDER BY d.is_local DESC LIMIT 1;
    END IF;
    IF t IS NULL THEN
        RAISE EXCEPTION 'write to resource "%" carries no fence token', r
            USING ERRCODE = 'TF002';
    END IF;
    SELECT b.token INTO m FROM broken_marks b WHERE b.resource = r;  -- no lock!
    PERFORM pg_sleep(random() * BROKEN_SLEEP);
    IF m IS NOT NULL AND t < m THEN
        RAISE EXCEPTION 'stale fence token for resource "%"', r
            USING ERRCODE = 'TF001', DETAIL = format('Token %s is below the current mark %s.', t, m);
    END IF;
    INSERT INTO broken_marks VALUES (r, t)
        ON CONFLICT (resource) DO UPDATE SET token = excluded.token;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    NEW.tok := t;
    RETURN NEW;
END
$$;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON hist_items
    FOR EACH ROW EXECUTE FUNCTION broken_guard();
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON hist_events
    FOR EACH ROW EXECUTE FUNCTION broken_guard();
"""


def connect(args, retry_for=0.0):
    """A connection, retrying for retry_for seconds (server restarting)."""
    deadline = time.monotonic() + retry_for
    while True:
        try:
            conn = psycopg2.connect(args.dsn or "", connect_timeout=5)
            return conn
        except psycopg2.OperationalError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def cmd_setup(args):
    conn = connect(args, retry_for=10)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        cur.execute(SCHEMA_COMMON)
        if args.guard == "broken":
            cur.execute(SCHEMA_BROKEN.replace("BROKEN_SLEEP", "%.4f" % (args.broken_sleep_ms / 1000.0)))
        else:
            cur.execute(SCHEMA_FENCE)
        cur.execute("SHOW track_commit_timestamp")
        if cur.fetchone()[0] != "on":
            print("history: track_commit_timestamp must be on", file=sys.stderr)
            return 1
    conn.close()
    return 0


# ----------------------------------------------------------- token sources

class SeqSource:
    """Tokens from a sequence, declared with fence_use.  No mutual exclusion
    at all: the guard alone must keep the history in order."""

    name = "seq"

    def __init__(self, args):
        self.args = args

    def acquire(self, cur, resource):
        cur.execute("SELECT nextval('hist_tokens')")
        token = cur.fetchone()[0]
        cur.execute("SELECT fence_use(%s, %s)", (resource, token))
        return token

    def release(self, cur, resource):
        pass


class RedisSource:
    """fenced_acquire with a short TTL; NULL (busy after the wait) means no
    lock this time.  The token is declared for the session by the function."""

    name = "redis"

    def __init__(self, args):
        self.args = args

    def acquire(self, cur, resource):
        cur.execute("SELECT fenced_acquire(%s, ttl => %s::interval, wait => %s::interval)",
                    (resource, "%d ms" % self.args.ttl_ms, "%d ms" % self.args.wait_ms))
        token = cur.fetchone()[0]
        return None if token is None else int(token)

    def release(self, cur, resource):
        cur.execute("SELECT fenced_release(%s)", (resource,))


SOURCES = {"seq": SeqSource, "redis": RedisSource}


# ----------------------------------------------------------------- clients

class Recorder:
    """The client's local record of outcomes: one JSON line per operation,
    written before the next operation starts."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **rec):
        rec["t"] = time.time()
        os.write(self.fd, (json.dumps(rec) + "\n").encode())


def client_main(args, cid):
    rnd = random.Random(args.seed * 1000 + cid)
    rec = Recorder(os.path.join(args.outdir, "client-%03d.jsonl" % cid))
    source = SOURCES[args.source](args)
    conn = None
    resources = list(range(1, args.resources + 1))
    # skewed: resource 1 is hot
    weights = [2.0 ** -(i) for i in range(len(resources))]
    repairs = 0

    def notices_scan(c):
        nonlocal repairs
        for n in c.notices:
            if "went backwards" in n:
                repairs += 1
                rec.write(op=-1, outcome="repair_warning", notice=n.strip())
        del c.notices[:]

    for op in range(args.ops):
        if conn is None or conn.closed:
            try:
                conn = connect(args, retry_for=args.reconnect_timeout)
                with conn.cursor() as cur:
                    cur.execute("SET statement_timeout = %s", ("%ds" % args.statement_timeout,))
                    cur.execute("SET application_name = %s", ("hist-client-%d" % cid,))
                    cur.execute("SET default_transaction_isolation = %s", (args.isolation,))
                    for s in args.set or []:
                        name, _, value = s.partition("=")
                        cur.execute("SELECT set_config(%s, %s, false)", (name, value))
                conn.commit()
            except psycopg2.Error as e:
                rec.write(op=op, outcome="connect_error", error=str(e).strip()[:300])
                conn = None
                time.sleep(rnd.uniform(0.02, 0.1))
                continue
        res_id = rnd.choices(resources, weights)[0]
        resource = "res:%d" % res_id
        base = dict(op=op, resource=resource)

        # 1. the token
        t0 = time.monotonic()
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                token = source.acquire(cur, resource)
            notices_scan(conn)
        except psycopg2.Error as e:
            # a Redis error (class 08 is an OperationalError in psycopg2),
            # or the database connection lost
            rec.write(outcome="acquire_error", code=e.pgcode, error=str(e).strip()[:300],
                      lost_connection=bool(conn.closed),
                      ms=int((time.monotonic() - t0) * 1000), **base)
            if conn.closed:
                conn = None
            time.sleep(rnd.uniform(0.02, 0.1))     # not a tight loop while Redis is down
            continue
        if token is None:
            rec.write(outcome="busy", **base)
            continue
        base["token"] = token

        # 2. sometimes stall past the lease
        if rnd.random() < args.stall_prob:
            pause = rnd.uniform(1.5, 3.0) * args.ttl_ms / 1000.0
            if args.stall == "sigstop" or (args.stall == "mixed" and rnd.random() < 0.5):
                # the parent sees us stopped and resumes us after a while
                os.kill(os.getpid(), signal.SIGSTOP)
            else:
                time.sleep(pause)

        # 3. the write, and its log rows, in one transaction
        explicit = args.token_mode == "explicit" or (
            args.token_mode == "mixed" and rnd.random() < 0.5)
        k = rnd.randint(1, args.keys)
        val = "c%d-o%d" % (cid, op)
        tok_sql = "%s" if explicit else "NULL"
        kinds = ["upsert", "upsert", "update", "event", "both"]
        if args.deletes:
            kinds.append("delete")
        kind = rnd.choice(kinds)
        rows = []
        phase = "write"
        try:
            conn.autocommit = False
            with conn.cursor() as cur:
                def params(*p):
                    return tuple(x for x in p if x is not _SKIP)
                tp = token if explicit else _SKIP
                if kind in ("upsert", "both"):
                    cur.execute(
                        "INSERT INTO hist_items AS i (res_id, k, val, tok) VALUES (%s, %s, %s, " + tok_sql + ")"
                        " ON CONFLICT (res_id, k) DO UPDATE SET val = excluded.val, tok = excluded.tok"
                        " RETURNING k, val, tok::bigint", params(res_id, k, val, tp))
                    rows += [("items", r[0], "write", r[1], r[2]) for r in cur.fetchall()]
                if kind == "update":
                    cur.execute(
                        "UPDATE hist_items SET val = %s" + (", tok = %s" if explicit else "") +
                        " WHERE res_id = %s AND k = %s RETURNING k, val, tok::bigint",
                        params(val, tp, res_id, k))
                    rows += [("items", r[0], "write", r[1], r[2]) for r in cur.fetchall()]
                if kind == "delete":
                    cur.execute(
                        "DELETE FROM hist_items WHERE res_id = %s AND k = %s RETURNING k, tok::bigint",
                        (res_id, k))
                    rows += [("items", r[0], "delete", None, token) for r in cur.fetchall()]
                if kind in ("event", "both"):
                    cur.execute(
                        "INSERT INTO hist_events (res_id, val, tok) VALUES (%s, %s, " + tok_sql + ")"
                        " RETURNING id, val, tok::bigint", params(res_id, val, tp))
                    rows += [("events", r[0], "write", r[1], r[2]) for r in cur.fetchall()]
                for (tbl, key, rkind, rval, rtok) in rows:
                    if rtok != token:
                        raise RuntimeError("row carries token %s, the client wrote %s" % (rtok, token))
                    cur.execute(
                        "INSERT INTO hist_log (run, client, op, resource, tbl, k, kind, val, token)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (args.run_id, cid, op, resource, tbl, key, rkind, rval, token))
            phase = "commit"
            conn.commit()
            rec.write(outcome="committed", kind=kind, explicit=explicit,
                      rows=[[r[0], r[1], r[2], r[3]] for r in rows], **base)
        except psycopg2.Error as e:
            if conn.closed:
                # lost before COMMIT was sent: aborted for sure; during: unknown
                rec.write(outcome="indeterminate" if phase == "commit" else "aborted",
                          code=e.pgcode, error=str(e).strip()[:300], kind=kind, **base)
                conn = None
                continue
            try:
                conn.rollback()
            except psycopg2.Error:
                conn = None
            outcome = {"TF001": "rejected", "TF002": "no_token"}.get(e.pgcode, "aborted")
            rec.write(outcome=outcome, code=e.pgcode, kind=kind,
                      error=str(e).strip().splitlines()[0][:300] if str(e).strip() else "", **base)
        # 4. give the lock back (it may have expired long ago)
        if conn is not None and rnd.random() < args.release_prob:
            try:
                conn.autocommit = True
                with conn.cursor() as cur:
                    source.release(cur, resource)
            except psycopg2.Error:
                if conn.closed:
                    conn = None
        if args.think_ms:
            time.sleep(rnd.uniform(0, args.think_ms) / 1000.0)
    if conn is not None:
        try:
            notices_scan(conn)
            conn.close()
        except Exception:
            pass


_SKIP = object()


def cmd_run(args):
    os.makedirs(args.outdir, exist_ok=True)
    for f in glob.glob(os.path.join(args.outdir, "client-*.jsonl")):
        os.unlink(f)
    args.run_id = "%s-%d" % (time.strftime("%Y%m%d%H%M%S"), os.getpid())
    with open(os.path.join(args.outdir, "run.json"), "w") as f:
        json.dump({k: v for k, v in vars(args).items() if k != "func"}, f)
    rnd = random.Random(args.seed)
    children = {}
    parent = os.getpid()
    for cid in range(args.clients):
        pid = os.fork()
        if pid == 0:
            # die with the parent: a client it stopped would stay stopped
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if os.getppid() != parent:
                os._exit(4)
            code = 0
            try:
                client_main(args, cid)
            except BaseException as e:  # a bug in the client, not an outcome
                import traceback
                traceback.print_exc()
                code = 3
            os._exit(code)
        children[pid] = cid

    # Resume clients that stopped themselves, and stop running ones at
    # random (--freeze-prob), each for 1.5 to 3 lease times.
    stopped = {}            # pid -> monotonic time to resume
    failed = 0
    start = time.monotonic()
    while children:
        now = time.monotonic()
        for pid, when in list(stopped.items()):
            if now >= when:
                os.kill(pid, signal.SIGCONT)
                del stopped[pid]
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if os.WIFSTOPPED(status):
                stopped[pid] = now + rnd.uniform(1.5, 3.0) * args.ttl_ms / 1000.0
                continue
            cid = children.pop(pid, None)
            stopped.pop(pid, None)
            if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                print("history: client %s failed (status %d)" % (cid, status), file=sys.stderr)
                failed += 1
        if args.freeze_prob > 0:
            for pid in children:
                if pid not in stopped and rnd.random() < args.freeze_prob:
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except ProcessLookupError:
                        pass
        if args.timeout and now - start > args.timeout:
            print("history: run timed out after %ds" % args.timeout, file=sys.stderr)
            for pid in children:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            failed += len(children)
            for pid in list(children):
                os.waitpid(pid, 0)
            break
        time.sleep(0.02)
    return 1 if failed else 0


# ----------------------------------------------------------------- checker

def load_outcomes(outdir):
    ops = {}
    repairs = []
    for path in sorted(glob.glob(os.path.join(outdir, "client-*.jsonl"))):
        cid = int(os.path.basename(path)[7:10])
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    continue        # torn last line: outcome unknown
                rec = json.loads(line)
                if rec["outcome"] == "repair_warning":
                    repairs.append(rec)
                    continue
                ops[(cid, rec["op"])] = rec
    return ops, repairs


def cmd_check(args):
    ops, repairs = load_outcomes(args.outdir)
    with open(os.path.join(args.outdir, "run.json")) as f:
        run_id = json.load(f)["run_id"]
    conn = connect(args, retry_for=30)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("""
        SELECT (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint AS cts, id,
               CASE WHEN run = %s THEN client ELSE -1 - client END, op, resource, tbl, k, kind, val, token
          FROM hist_log""", (run_id,))
    log = cur.fetchall()
    no_ts = [r for r in log if r[0] is None]
    # commit order; rows of one transaction (or of one restore) share a
    # timestamp and are taken in token order
    log.sort(key=lambda r: (r[0] or 0, r[9], r[1]))

    problems = []
    counts = dict(attempted=0, committed=0, rejected=0, busy=0, acquire_errors=0,
                  aborted=0, no_token=0, indeterminate=0, connect_errors=0)
    for rec in ops.values():
        o = rec["outcome"]
        counts["attempted"] += 1
        key = {"committed": "committed", "rejected": "rejected", "busy": "busy",
               "acquire_error": "acquire_errors", "aborted": "aborted",
               "no_token": "no_token", "indeterminate": "indeterminate",
               "connect_error": "connect_errors"}[o]
        counts[key] += 1

    # 1. per resource, tokens never decrease in commit order
    violations = []
    high = {}
    for r in log:
        cts, _id, client, op, resource, tbl, k, kind, val, token = r
        h = high.get(resource)
        if h is not None and token < h[0]:
            violations.append((resource, h, (token, client, op, cts)))
        if h is None or token >= h[0]:
            high[resource] = (token, client, op, cts)
    def ts(us):
        return time.strftime("%H:%M:%S", time.localtime(us // 1000000)) + ".%06d" % (us % 1000000)
    violating_ops = sorted(set((w[1], w[2]) for (_, _, w) in violations))
    for (resource, h, w) in violations[:10]:
        problems.append("VIOLATION %s: token %s (client %s op %s, committed %s) after token %s "
                        "(client %s op %s, committed %s)" % (resource, w[0], w[1], w[2], ts(w[3]),
                                                            h[0], h[1], h[2], ts(h[3])))

    # 1b. the mark's row lock is held to the commit: per resource, a log row
    # (numbered when written, after the guard locked the mark) of a later
    # commit must have a higher number than those of earlier commits
    order_mismatches = 0
    groups = {}
    for r in log:
        g = groups.setdefault(r[4], {"ts": None, "max_before": 0, "max_here": 0})
        if r[0] != g["ts"]:
            g["max_before"] = max(g["max_before"], g["max_here"])
            g["ts"], g["max_here"] = r[0], 0
        if r[1] < g["max_before"]:
            order_mismatches += 1
            if order_mismatches <= 5:
                problems.append("ORDER %s: log row %d committed after a row numbered %d"
                                % (r[4], r[1], g["max_before"]))
        g["max_here"] = max(g["max_here"], r[1])

    # 2. every acknowledged write is there, and nothing else is
    by_op = {}
    for r in log:
        by_op.setdefault((r[2], r[3]), []).append(r)
    lost = 0
    for key, rec in ops.items():
        if rec["outcome"] != "committed":
            continue
        got = by_op.get(key, [])
        if len(got) != len(rec["rows"]):
            lost += 1
            if lost <= 10:
                problems.append("LOST client %s op %s: acknowledged %d rows, log has %d"
                                % (key[0], key[1], len(rec["rows"]), len(got)))
    phantoms = 0
    for key, rows in by_op.items():
        rec = ops.get(key)
        if key[0] < 0 and args.foreign_ok:
            continue            # another run's (restored history)
        if rec is None or rec["outcome"] not in ("committed", "indeterminate"):
            phantoms += 1
            if phantoms <= 10:
                problems.append("PHANTOM client %s op %s in the log, outcome %s"
                                % (key[0], key[1], rec and rec["outcome"]))

    # 3. shared tokens: one token, one resource, two different clients
    owners = {}
    for r in log:
        owners.setdefault((r[4], r[9]), set()).add(r[2])
    shared = sum(1 for v in owners.values() if len(v) > 1)
    for (resource, token), clients in sorted(owners.items()):
        if len(clients) > 1:
            problems.append("SHARED token %s of %s was written by clients %s"
                            % (token, resource, sorted(clients)))

    # 3b. shared grants: one token of one resource handed to two
    # acquisitions, whether or not either wrote with it
    grants = {}
    for key, rec in ops.items():
        if rec.get("token") is not None:
            grants.setdefault((rec["resource"], rec["token"]), []).append(key)
    shared_grants = 0
    for (resource, token), keys in sorted(grants.items()):
        if len(keys) > 1:
            shared_grants += 1
            if shared_grants <= 10:
                problems.append("SHARED GRANT token %s of %s was issued to client/op %s"
                                % (token, resource, sorted(keys)))

    # 4. the marks are the highest tokens logged, or above them a token
    # granted to an acquisition, which raised the mark (1.2) and then
    # wrote nothing that committed
    if args.guard == "broken":
        cur.execute("SELECT resource, token FROM broken_marks")
    else:
        cur.execute("SELECT resource, token::bigint FROM fence_marks WHERE resource LIKE 'res:%'")
    marks = dict(cur.fetchall())
    granted = {}
    for (resource, token) in grants:
        granted.setdefault(resource, set()).add(int(token))
    mark_mismatches = 0
    for resource in sorted(set(marks) | set(high)):
        want = high.get(resource, (None,))[0]
        got = marks.get(resource)
        if got == want:
            continue
        if (args.guard != "broken" and got is not None
                and (want is None or got > want) and got in granted.get(resource, ())):
            continue
        mark_mismatches += 1
        problems.append("MARK %s is %s, the highest token logged is %s"
                        % (resource, got, want))

    # 5. the rows are what the last committed write of each left
    last = {}
    for r in log:
        if r[5] == "items":
            last[(int(r[4][4:]), r[6])] = r
    cur.execute("SELECT res_id, k, val, tok::bigint FROM hist_items")
    rows = {(a, b): (c, d) for a, b, c, d in cur.fetchall()}
    state_mismatches = 0
    for key in sorted(set(last) | set(rows)):
        lr = last.get(key)
        want = None if lr is None or lr[7] == "delete" else (lr[8], lr[9])
        if rows.get(key) != want and not (lr is None and args.foreign_ok):
            state_mismatches += 1
            if state_mismatches <= 10:
                problems.append("STATE hist_items %s is %s, the last logged write left %s"
                                % (key, rows.get(key), want))
    cur.execute("SELECT count(*) FROM hist_events")
    n_events = cur.fetchone()[0]
    logged_events = sum(1 for r in log if r[5] == "events")
    if n_events != logged_events:
        state_mismatches += 1
        problems.append("STATE hist_events has %d rows, the log %d" % (n_events, logged_events))

    # commits acknowledged after a fault (time stamp in --after-file)
    after = {}
    repairs_after = {}
    for path in args.after_file or []:
        try:
            with open(path) as f:
                t = float(f.read().strip())
        except (OSError, ValueError):
            continue
        after[os.path.basename(path)] = sum(
            1 for rec in ops.values() if rec["outcome"] == "committed" and rec["t"] > t)
        repairs_after[os.path.basename(path)] = sum(1 for rec in repairs if rec["t"] > t)
    acquire_ms = [rec.get("ms", 0) for rec in ops.values() if rec["outcome"] == "acquire_error"]
    error_codes = {}
    for rec in ops.values():
        if rec["outcome"] in ("aborted", "acquire_error", "indeterminate"):
            c = "%s:%s" % (rec["outcome"], rec.get("code") or "conn")
            error_codes[c] = error_codes.get(c, 0) + 1

    result = dict(counts, violations=len(violating_ops), violating_rows=len(violations),
                  order_mismatches=order_mismatches, lost=lost, phantoms=phantoms,
                  mark_mismatches=mark_mismatches, state_mismatches=state_mismatches,
                  shared_tokens=shared, shared_grants=shared_grants, grants=len(grants),
                  repairs=len(repairs), log_rows=len(log),
                  log_rows_without_commit_ts=len(no_ts),
                  max_acquire_error_ms=max(acquire_ms) if acquire_ms else 0,
                  committed_after=after, repairs_after=repairs_after, error_codes=error_codes)
    for p in problems[:40]:
        print("history: " + p)
    print("history: " + " ".join("%s=%s" % (k, result[k]) for k in (
        "attempted", "committed", "rejected", "violations", "lost")))
    print("history: detail " + " ".join("%s=%s" % (k, v) for k, v in result.items()
                                        if k not in ("attempted", "committed", "rejected",
                                                     "violations", "lost")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)

    bad = (len(violations) + lost + phantoms + mark_mismatches + state_mismatches + order_mismatches
           + len(no_ts) + counts["no_token"])
    if shared and not args.allow_shared_tokens:
        bad += shared
    bad += shared_grants
    if counts["committed"] == 0:
        print("history: nothing committed; the history proves nothing")
        bad += 1
    if args.expect_violations:
        if violations:
            print("history: the checker caught %d violations, as expected" % len(violations))
            return 0
        print("history: expected violations, found none")
        return 1
    return 1 if bad else 0


def cmd_all(args):
    rc = cmd_setup(args)
    if rc:
        return rc
    t0 = time.monotonic()
    rc = cmd_run(args)
    print("history: %d clients x %d operations (%s tokens, %s guard) in %.1f s"
          % (args.clients, args.ops, args.source, args.guard, time.monotonic() - t0))
    rc2 = cmd_check(args)
    return rc or rc2


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("--dsn", default=None, help="libpq connection string (default: environment)")
        sp.add_argument("--guard", choices=["fence", "broken"], default="fence")
        sp.add_argument("--broken-sleep-ms", type=float, default=20,
                        help="broken guard: longest sleep between reading and raising the mark")

    def run_opts(sp):
        sp.add_argument("--outdir", required=True)
        sp.add_argument("--clients", type=int, default=8)
        sp.add_argument("--ops", type=int, default=40, help="operations per client")
        sp.add_argument("--long", action="store_true", help="10,000+ operations in all")
        sp.add_argument("--resources", type=int, default=3)
        sp.add_argument("--keys", type=int, default=4, help="rows per resource")
        sp.add_argument("--source", choices=sorted(SOURCES), default="seq")
        sp.add_argument("--token-mode", choices=["declared", "explicit", "mixed"], default="mixed")
        sp.add_argument("--ttl-ms", type=int, default=200)
        sp.add_argument("--wait-ms", type=int, default=1000)
        sp.add_argument("--stall-prob", type=float, default=0.25)
        sp.add_argument("--stall", choices=["sleep", "sigstop", "mixed"], default="mixed")
        sp.add_argument("--freeze-prob", type=float, default=0.002,
                        help="chance per client per 20 ms that the parent SIGSTOPs it")
        sp.add_argument("--release-prob", type=float, default=0.8)
        sp.add_argument("--deletes", action="store_true", default=True)
        sp.add_argument("--no-deletes", dest="deletes", action="store_false")
        sp.add_argument("--think-ms", type=int, default=0)
        sp.add_argument("--seed", type=int, default=int(os.environ.get("HISTORY_SEED", "0")) or
                        (int(time.time()) % 100000))
        sp.add_argument("--reconnect-timeout", type=float, default=60)
        sp.add_argument("--statement-timeout", type=int, default=30)
        sp.add_argument("--timeout", type=int, default=0, help="give up the run after this many seconds")
        sp.add_argument("--set", action="append", help="name=value: a setting for each client session")
        sp.add_argument("--isolation", default="read committed",
                        choices=["read committed", "repeatable read", "serializable"])

    def check_opts(sp):
        sp.add_argument("--outdir", required=True)
        sp.add_argument("--expect-violations", action="store_true")
        sp.add_argument("--allow-shared-tokens", action="store_true")
        sp.add_argument("--foreign-ok", action="store_true",
                        help="log rows of operations not in outdir are expected (restored history)")
        sp.add_argument("--after-file", action="append",
                        help="file holding a time (epoch s): count commits acknowledged after it")
        sp.add_argument("--json", default=None)

    sp = sub.add_parser("setup")
    common(sp)
    sp.set_defaults(func=cmd_setup)
    sp = sub.add_parser("run")
    common(sp)
    run_opts(sp)
    sp.set_defaults(func=cmd_run)
    sp = sub.add_parser("check")
    common(sp)
    check_opts(sp)
    sp.set_defaults(func=cmd_check)
    sp = sub.add_parser("all")
    common(sp)
    run_opts(sp)
    sp.add_argument("--expect-violations", action="store_true")
    sp.add_argument("--allow-shared-tokens", action="store_true")
    sp.add_argument("--json", default=None)
    sp.add_argument("--after-file", action="append")
    sp.set_defaults(func=cmd_all, foreign_ok=False)

    args = p.parse_args(argv)
    if args.guard == "broken" and hasattr(args, "token_mode"):
        args.token_mode = "explicit"    # the broken guard cannot tell an UPDATE's own token
    if getattr(args, "long", False):
        args.ops = max(args.ops, -(-10000 // args.clients))
    print("history: seed %s" % getattr(args, "seed", "-")) if args.cmd in ("run", "all") else None
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
