"""The client of test/bench/job: the same Python client for every design.

Run by test/bench/job, which starts the servers and creates the tables.
Each of WORKERS processes holds one psycopg2 connection (TCP, loopback)
and one redis-py connection, and runs, for SECONDS, the job of the design
it is told, on random accounts out of ACCOUNTS.  The parent starts the
workers of one measurement together, adds their jobs, and reads the CPU
time of the backends and of redis-server from /proc (schedstat: ns on
a CPU; stat: clock ticks, where schedstat is missing).

Usage: job.py PGPORT REDIS_PORT REDIS_PID SECONDS ROUNDS SYNC [DIRECT_PORT]
prints the backends' PIDs, then one line per measurement: round design
jobs/s backend-us/job redis-us/job client-us/job.  With DIRECT_PORT,
PGPORT is a pooler's (pgbouncer in transaction mode): the workers set
nothing for their session (synchronous_commit is the server's), and the
backends are the server connections found on DIRECT_PORT after the
warm-up.

       job.py summary FILE DESIGN...
prints the summary of FILE's measurements: per design the median jobs/s,
the median over rounds of its rate over its hand-written twin's in the
same round (hand, or rw_hand for rw_*) with a distribution-free 95%
interval of that median (order statistics), and the CPU per job.
"""
import math
import multiprocessing as mp
import os
import random
import sys
import time
import uuid

import redis

from benchlib import LOCK_LUA, UNLOCK_LUA, connect, median

ACCOUNTS = 1000
WORKERS = int(os.environ.get("WORKERS", "4"))

DESIGNS = ["hand", "hand_guard", "fenced", "fenced_guard", "rw_hand", "rw_fenced", "rw_fenced2"]


def cpu_ns(pid):
    """CPU time of a process in ns, or None where /proc does not say."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class Worker:
    def __init__(self, pgport, redis_port, sync, pooled):
        self.pg = connect(pgport)
        cur = self.pg.cursor()
        self.backend = None
        if not pooled:
            cur.execute("SET synchronous_commit = " + sync)
            cur.execute("SELECT pg_backend_pid()")
            self.backend = cur.fetchone()[0]
        self.cur = cur
        self.r = redis.Redis(host="127.0.0.1", port=redis_port)
        self.lock = self.r.register_script(LOCK_LUA)
        self.unlock = self.r.register_script(UNLOCK_LUA)
        self.owner = uuid.uuid4().hex

    def hand_lock(self, prefix, n):
        while True:
            t = self.lock(keys=["%s:lock:%d" % (prefix, n), "%s:tok:%d" % (prefix, n)],
                          args=[self.owner, 10000])
            if t is not None:
                return t
            time.sleep(0.001)

    def hand_unlock(self, prefix, n):
        self.unlock(keys=["%s:lock:%d" % (prefix, n)], args=[self.owner])

    def job(self, design, n):
        cur = self.cur
        if design == "hand" or design == "hand_guard":
            table = "acct_hand" if design == "hand" else "acct_hguard"
            t = self.hand_lock(design, n)
            if design == "hand":
                cur.execute("UPDATE acct_hand SET balance = balance + 1, tok = %s"
                            " WHERE id = %s AND tok < %s", (t, n, t))
            else:
                cur.execute("UPDATE " + table + " SET balance = balance + 1, tok = %s"
                            " WHERE id = %s", (t, n))
            self.hand_unlock(design, n)
        elif design == "fenced" or design == "fenced_guard":
            prefix, table = ("fp", "acct_fplain") if design == "fenced" else ("fg", "acct_fguard")
            cur.execute("BEGIN; SELECT fenced_acquire_xact('" + prefix + ":%s', wait => '10s');"
                        " UPDATE " + table + " SET balance = balance + 1 WHERE id = %s;"
                        " COMMIT", (n, n))
        elif design == "rw_hand":
            t = self.hand_lock("rw", n)
            cur.execute("SELECT balance FROM acct_rwhand WHERE id = %s", (n,))
            b = cur.fetchone()[0]
            cur.execute("UPDATE acct_rwhand SET balance = %s, tok = %s"
                        " WHERE id = %s AND tok < %s", (b + 1, t, n, t))
            self.hand_unlock("rw", n)
        elif design == "rw_fenced":
            # BEGIN sent with the acquisition: psycopg2's own BEGIN would be
            # a round trip of its own
            cur.execute("BEGIN; SELECT fenced_acquire_xact('rf:%s', wait => '10s')", (n,))
            cur.execute("SELECT balance FROM acct_rwfenced WHERE id = %s", (n,))
            b = cur.fetchone()[0]
            cur.execute("UPDATE acct_rwfenced SET balance = %s WHERE id = %s", (b + 1, n))
            cur.execute("COMMIT")
        elif design == "rw_fenced2":
            # doc/clients.md's two round trips: BEGIN, the lock and the read
            # in a statement of its own (its snapshot taken once the lock is
            # held); then the write and COMMIT
            cur.execute("BEGIN; SELECT fenced_acquire_xact(%(r)s, wait => '10s');"
                        " SELECT balance, EXISTS (SELECT FROM fence_declared()"
                        " WHERE resource = %(r)s) FROM acct_rwfenced2 WHERE id = %(n)s",
                        {"r": "r2:%d" % n, "n": n})
            b, locked = cur.fetchone()
            if not locked:
                cur.execute("ROLLBACK")
                raise RuntimeError("r2:%d busy after 10 s" % n)
            cur.execute("UPDATE acct_rwfenced2 SET balance = %s WHERE id = %s; COMMIT",
                        (b + 1, n))
        else:
            raise ValueError(design)

    def run(self, design, seconds):
        rnd = random.Random()
        jobs = 0
        own = time.process_time()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.job(design, rnd.randint(1, ACCOUNTS))
            jobs += 1
        return jobs, time.process_time() - own


def serve(conn, pgport, redis_port, sync, pooled):
    w = Worker(pgport, redis_port, sync, pooled)
    conn.send(w.backend)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(w.run(*msg))


def cpu_sum(pids):
    """CPU time of all of pids in ns, or None if /proc does not say for one."""
    total = 0
    for pid in pids:
        ns = cpu_ns(pid)
        if ns is None:
            return None
        total += ns
    return total


def server_connections(direct_port):
    """The client backends of the server other than this one: behind the
    pooler, its server connections."""
    conn = connect(direct_port)
    with conn.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                    " AND pid <> pg_backend_pid()")
        pids = [r[0] for r in cur.fetchall()]
    conn.close()
    return pids


def measure():
    pgport, redis_port, redis_pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    seconds, rounds, sync = float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    direct_port = int(sys.argv[7]) if len(sys.argv) > 7 else None
    designs = os.environ.get("DESIGNS", " ".join(DESIGNS)).split()
    pipes = []
    for _ in range(WORKERS):
        parent, child = mp.Pipe()
        mp.Process(target=serve, args=(child, pgport, redis_port, sync, direct_port is not None),
                   daemon=True).start()
        pipes.append(parent)
    backends = [b for b in (p.recv() for p in pipes) if b is not None]
    # warm up: every design once, briefly (caches, plans, scripts loaded)
    plan = [(0, d, 1.0) for d in designs]
    for rnd in range(1, rounds + 1):
        order = designs if rnd % 2 == 1 else list(reversed(designs))
        plan += [(rnd, d, seconds) for d in order]
    for i, (rnd, design, secs) in enumerate(plan):
        if i == len(designs):  # warmed up: behind the pooler, its connections are open
            if direct_port is not None:
                backends = server_connections(direct_port)
            print("backends " + " ".join(map(str, backends)), flush=True)
        r0, b0 = cpu_ns(redis_pid), cpu_sum(backends)
        t0 = time.monotonic()
        for p in pipes:
            p.send((design, secs))
        results = [p.recv() for p in pipes]
        elapsed = time.monotonic() - t0
        r1, b1 = cpu_ns(redis_pid), cpu_sum(backends)
        jobs = sum(j for j, _ in results)
        client = sum(o for _, o in results) * 1e6 / jobs
        be = "-" if b0 is None or b1 is None else "%.1f" % ((b1 - b0) / 1000.0 / jobs)
        rc = "-" if r0 is None or r1 is None else "%.1f" % ((r1 - r0) / 1000.0 / jobs)
        if rnd > 0:
            print("%d %s %.0f %s %s %.1f" % (rnd, design, jobs / elapsed, be, rc, client),
                  flush=True)
    for p in pipes:
        p.send(None)


def median_interval(values):
    """A distribution-free interval of the median of values: the k-th
    smallest and k-th largest, k the largest with P(Binomial(n, 1/2) < k)
    <= 0.025; returns (low, high, coverage), or None when n is below 6."""
    v = sorted(values)
    n = len(v)
    tail, k = 0.0, 0
    while True:
        p = tail + math.comb(n, k) / 2.0 ** n
        if p > 0.025:
            break
        tail, k = p, k + 1
    if k == 0:
        return None
    return v[k - 1], v[n - k], 1 - 2 * tail


def summary():
    path, designs = sys.argv[2], sys.argv[3:]
    rows = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) == 6 and fields[0].isdigit():
                rows[(int(fields[0]), fields[1])] = fields[2:]
    print("%-12s %9s %7s %17s %14s %12s %13s" % ("design", "jobs/s", "ratio", "95% interval",
                                                   "backend-us/job", "redis-us/job",
                                                   "client-us/job"))
    for d in designs:
        anchor = "rw_hand" if d.startswith("rw_") else "hand"
        mine = {r: v for (r, dd), v in rows.items() if dd == d}
        if not mine:
            continue
        rate = median(float(v[0]) for v in mine.values())
        ratios = [float(v[0]) / float(rows[(r, anchor)][0]) for r, v in mine.items()
                  if (r, anchor) in rows and float(rows[(r, anchor)][0]) > 0]
        ratio = median(ratios)
        ci = median_interval(ratios) if ratios and d != anchor else None

        def col(i):
            m = median(float(v[i]) for v in mine.values() if v[i] != "-")
            return "-" if m is None else "%.0f" % m
        print("%-12s %9.0f %7s %17s %14s %12s %13s" % (
            d, rate, "-" if ratio is None else "%.3f" % ratio,
            "-" if ci is None else "%.2f-%.2f (%d%%)" % (ci[0], ci[1], round(100 * ci[2])),
            col(1), col(2), col(3)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["summary"]:
        summary()
    else:
        measure()
