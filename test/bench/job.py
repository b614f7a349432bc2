"""The client of test/bench/job: the same Python client for every design.

Run by test/bench/job, which starts the servers and creates the tables.
Each of WORKERS processes holds one psycopg2 connection (TCP, loopback)
and one redis-py connection, and runs, for SECONDS, the job of the design
it is told, on random accounts out of ACCOUNTS.  The parent starts the
workers of one measurement together, adds their jobs, and reads the CPU
time of their backends and of redis-server from /proc (schedstat: ns on
a CPU; stat: clock ticks, where schedstat is missing).

Usage: job.py PGPORT REDIS_PORT REDIS_PID SECONDS ROUNDS SYNC
prints the backends' PIDs, then one line per measurement: round design
jobs/s backend-us/job redis-us/job client-us/job, and nothing else (the summary is the shell's).
"""
import multiprocessing as mp
import os
import random
import sys
import time
import uuid

import psycopg2
import redis

ACCOUNTS = 1000
WORKERS = 4

# The hand-written lock: SET NX PX and INCR of a counter in one script, and
# an owner-checked release; redis-py sends them with EVALSHA (register_script).
LOCK_LUA = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
"""
UNLOCK_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

DESIGNS = ["hand", "hand_guard", "fenced", "fenced_guard", "rw_hand", "rw_fenced"]


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
    def __init__(self, pgport, redis_port, sync):
        self.pg = psycopg2.connect(host="127.0.0.1", port=pgport, user="postgres",
                                   dbname="postgres")
        self.pg.autocommit = True
        cur = self.pg.cursor()
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
        else:
            raise ValueError(design)

    def run(self, design, seconds):
        rnd = random.Random()
        jobs = 0
        before = cpu_ns(self.backend)
        own = time.process_time()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.job(design, rnd.randint(1, ACCOUNTS))
            jobs += 1
        after = cpu_ns(self.backend)
        own = time.process_time() - own
        return jobs, None if before is None or after is None else after - before, own


def serve(conn, pgport, redis_port, sync):
    w = Worker(pgport, redis_port, sync)
    conn.send(w.backend)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(w.run(*msg))


def main():
    pgport, redis_port, redis_pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    seconds, rounds, sync = float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    designs = os.environ.get("DESIGNS", " ".join(DESIGNS)).split()
    pipes = []
    for _ in range(WORKERS):
        parent, child = mp.Pipe()
        mp.Process(target=serve, args=(child, pgport, redis_port, sync), daemon=True).start()
        pipes.append(parent)
    backends = [p.recv() for p in pipes]
    print("backends " + " ".join(map(str, backends)), flush=True)
    # warm up: every design once, briefly (caches, plans, scripts loaded)
    plan = [(0, d, 1.0) for d in designs]
    for rnd in range(1, rounds + 1):
        order = designs if rnd % 2 == 1 else list(reversed(designs))
        plan += [(rnd, d, seconds) for d in order]
    for rnd, design, secs in plan:
        r0 = cpu_ns(redis_pid)
        t0 = time.monotonic()
        for p in pipes:
            p.send((design, secs))
        results = [p.recv() for p in pipes]
        elapsed = time.monotonic() - t0
        r1 = cpu_ns(redis_pid)
        jobs = sum(j for j, _, _ in results)
        cpus = [c for _, c, _ in results]
        client = sum(o for _, _, o in results) * 1e6 / jobs
        be = "-" if None in cpus else "%.1f" % (sum(cpus) / 1000.0 / jobs)
        rc = "-" if r0 is None or r1 is None else "%.1f" % ((r1 - r0) / 1000.0 / jobs)
        if rnd > 0:
            print("%d %s %.0f %s %s %.1f" % (rnd, design, jobs / elapsed, be, rc, client),
                  flush=True)
    for p in pipes:
        p.send(None)


if __name__ == "__main__":
    main()
