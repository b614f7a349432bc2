#!/usr/bin/python3
"""A randomized model check of the marks (issue 33).

Random histories of one session against a real server, each checked step
by step against a reference model of the marks, which is a dictionary:

- fenced writes through fence_guard('tok', '{res}') (lax) and
  fence_guard('tok', '{res}', 'strict'), one row or many rows (up to 300
  resources, more than the per-transaction cache has slots) in one
  statement, with tokens below, at and above the mark;
- fence_advance, fence_forget, and a deferred constraint trigger calling
  fence_advance at commit;
- SAVEPOINT, RELEASE, ROLLBACK TO (nested beyond the cache's levels);
- COMMIT, ROLLBACK, PREPARE TRANSACTION then COMMIT or ROLLBACK PREPARED.

The model: a lax write is accepted when its token is at or above the
mark, a strict one when above it, or equal to a mark this transaction
set or one that no write has used since fence_advance set it (in any
transaction: the mark's set_by); fence_advance raises and returns
max(mark, token).  After every step
the session's own readers (fence_mark, the fence_marks view) must show
the model's mark of the transaction, a SELECT of fence_high_water no more
than it (the version written, which raises kept in memory may exceed),
and a second session, the committed marks.

Histories run until MODEL_SECONDS have passed (default 60) or
MODEL_HISTORIES have run; history k draws from Random(seed, k), so a
failure is replayed with MODEL_SEED=<seed> MODEL_ONLY=<k>.  Prints one
"ok - ..." or "not ok - ..." line per property and exits 1 on a failure.
Connection from libpq's environment.
"""
import copy
import os
import random
import sys
import time

import psycopg2

SEED = int(os.environ.get("MODEL_SEED", "33"))
SECONDS = float(os.environ.get("MODEL_SECONDS", "60"))
HISTORIES = int(os.environ.get("MODEL_HISTORIES", "100000"))
ONLY = os.environ.get("MODEL_ONLY")
COLD = 300

SETUP = """
CREATE EXTENSION IF NOT EXISTS fencing;
DROP TABLE IF EXISTS m_lax, m_strict, m_defer;
CREATE TABLE m_lax (res text, tok fence_token);
CREATE TABLE m_strict (res text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT ON m_lax
    FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '{res}');
CREATE TRIGGER fence BEFORE INSERT ON m_strict
    FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '{res}', 'strict');
CREATE TABLE m_defer (res text, tok bigint);
CREATE OR REPLACE FUNCTION m_defer_advance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fence_advance(NEW.res, NEW.tok::text::fence_token);
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER advance AFTER INSERT ON m_defer
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION m_defer_advance();
"""


class Failure(Exception):
    pass


PRELOADED = False


class Model:
    """The marks: committed, and as the open transaction sees them."""

    def __init__(self, preloaded):
        self.committed = {}      # res -> token
        # Whether a write set (or used) each committed mark's token, or
        # fence_advance did (fence_high_water.set_by): strict mode
        # accepts one write at a token fence_advance set, in any session.
        self.written = {}        # res -> bool
        # res -> (token, set by this transaction, a write set or used it)
        self.cur = None
        self.deferred = None     # (res, token) queued for commit
        self.savepoints = []     # (name, saved cur, saved deferred)
        self.preloaded = preloaded

    def begin(self):
        self.cur = {r: (t, False, self.written[r]) for r, t in self.committed.items()}
        self.deferred = []
        self.savepoints = []

    def mark(self, res):
        m = self.cur.get(res) if self.cur is not None else None
        return None if m is None else m[0]

    def write(self, res, tok, strict):
        m = self.cur.get(res)
        if m is None or tok > m[0]:
            self.cur[res] = (tok, True, True)
            return True
        if tok != m[0] or (strict and not m[1] and m[2]):
            return False
        if not m[2]:
            # the first write at a token fence_advance set records itself
            self.cur[res] = (tok, True, True)
        return True

    def advance(self, res, tok):
        m = self.cur.get(res)
        if m is None or tok > m[0]:
            self.cur[res] = (tok, True, False)
            m = self.cur[res]
        return m[0]

    def forget(self, res):
        return self.cur.pop(res, None) is not None

    def savepoint(self, name):
        self.savepoints.append((name, copy.copy(self.cur), list(self.deferred)))

    def rollback_to(self, i):
        name, cur, deferred = self.savepoints[i]
        del self.savepoints[i + 1:]
        self.cur = copy.copy(cur)
        self.deferred = list(deferred)

    def release(self, i):
        del self.savepoints[i:]

    def commit(self, prepared=False):
        for res, tok in self.deferred:
            self.advance(res, tok)
        self.committed = {r: t for r, (t, _, _) in self.cur.items()}
        self.written = {r: w for r, (_, _, w) in self.cur.items()}
        self.cur = None

    def rollback(self):
        self.cur = None


class History:
    def __init__(self, conn, other, k):
        self.conn = conn
        self.other = other
        self.k = k
        self.rng = random.Random(SEED * 1000003 + k)
        self.model = Model(PRELOADED)
        self.log = []
        self.hot = [f"h{k}:{c}" for c in "abcd"]
        self.ops = 0

    def res(self):
        if self.rng.random() < 0.8:
            return self.rng.choice(self.hot)
        return f"h{self.k}:c{self.rng.randrange(COLD)}"

    def tok(self, res):
        m = self.model.mark(res)
        base = 10 if m is None else m
        return max(1, base + self.rng.randint(-2, 3))

    def sql(self, stmt, params=None, conn=None):
        """Run stmt; (rows, None) or (None, sqlstate)."""
        self.log.append(stmt if params is None else f"{stmt} % {params!r}")
        cur = (conn or self.conn).cursor()
        try:
            cur.execute(stmt, params)
            rows = cur.fetchall() if cur.description else []
            return rows, None
        except psycopg2.Error as e:
            return None, e.pgcode
        finally:
            cur.close()

    def expect(self, what, want, got):
        if want != got:
            raise Failure(f"{what}: expected {want!r}, got {got!r}")

    def check_reads(self, res):
        want = self.model.mark(res)
        rows, err = self.sql("SELECT fence_mark(%s)::text", (res,))
        self.expect(f"fence_mark({res}) in the transaction", None, err)
        got = None if rows[0][0] is None else int(rows[0][0])
        self.expect(f"fence_mark({res}) in the transaction", want, got)
        q = "SELECT token::text FROM fence_marks WHERE resource = %s"
        rows, err = self.sql(q, (res,))
        self.expect(q, None, err)
        got = int(rows[0][0]) if rows else None
        self.expect(f"{q} [{res}] in the transaction", want, got)

        # The table itself shows the version written, a lower bound: the
        # transaction may hold the mark higher in memory (marks.c).
        q = "SELECT token::text FROM fence_high_water WHERE resource = %s"
        rows, err = self.sql(q, (res,))
        self.expect(q, None, err)
        got = int(rows[0][0]) if rows else None
        self.expect(f"{q} [{res}] in the transaction: a row if a mark",
                    want is None, got is None)
        if got is not None and got > want:
            raise Failure(f"{q} [{res}] in the transaction: {got} above the mark {want}")

    def check_other(self, res):
        rows, err = self.sql("SELECT fence_mark(%s)::text", (res,), self.other)
        self.expect("fence_mark in another session", None, err)
        got = None if rows[0][0] is None else int(rows[0][0])
        self.expect(f"fence_mark({res}) in another session",
                    self.model.committed.get(res), got)

    def after_error(self, err, what):
        """A rejected statement: roll back to a savepoint, or the transaction."""
        self.expect(what, "TF001", err)
        sps = self.model.savepoints
        if sps:
            i = self.rng.randrange(len(sps))
            self.step(f"ROLLBACK TO SAVEPOINT {sps[i][0]}")
            self.model.rollback_to(i)
        else:
            self.step("ROLLBACK")
            self.model.rollback()

    def step(self, stmt, params=None):
        rows, err = self.sql(stmt, params)
        self.expect(stmt, None, err)
        return rows

    def write_one(self):
        res = self.res()
        tok = self.tok(res)
        strict = self.rng.random() < 0.35
        table = "m_strict" if strict else "m_lax"
        want = self.model.write(res, tok, strict)
        _, err = self.sql(f"INSERT INTO {table} VALUES (%s, %s)", (res, tok))
        if want:
            self.expect(f"write {tok} to {res} accepted (strict={strict})", None, err)
        else:
            self.after_error(err, f"write {tok} to {res} rejected (strict={strict})")

    def write_many(self):
        """One INSERT of many rows, tokens rising per resource."""
        n = self.rng.choice([5, 50, 400, 1200])
        spread = self.rng.choice([1, 3, COLD])
        base = max([self.model.mark(f"h{self.k}:c{i}") or 0 for i in range(min(spread, COLD))] +
                   [0]) + self.rng.randint(-1, 2)
        strict = self.rng.random() < 0.3
        table = "m_strict" if strict else "m_lax"
        saved = copy.copy(self.model.cur)
        ok = True
        for g in range(1, n + 1):
            if not self.model.write(f"h{self.k}:c{g % spread}", max(1, base + g // spread), strict):
                ok = False
                break
        if not ok:
            self.model.cur = saved
        _, err = self.sql(
            f"INSERT INTO {table} SELECT 'h{self.k}:c' || (g %% %s), greatest(1, %s + g / %s)"
            " FROM generate_series(1, %s) g", (spread, base, spread, n))
        if ok:
            self.expect(f"bulk of {n} rows accepted", None, err)
        else:
            self.after_error(err, f"bulk of {n} rows rejected")

    def op(self):
        """One random step of an open transaction."""
        m = self.model
        r = self.rng.random()
        self.ops += 1
        if r < 0.40:
            self.write_one()
        elif r < 0.46:
            self.write_many()
        elif r < 0.53:
            res, tok = self.res(), None
            tok = self.tok(res)
            rows = self.step("SELECT fence_advance(%s, %s::text::fence_token)::text", (res, tok))
            self.expect(f"fence_advance({res}, {tok})", m.advance(res, tok), int(rows[0][0]))
        elif r < 0.56:
            res = self.res()
            tok = self.tok(res) + 1
            self.step("INSERT INTO m_defer VALUES (%s, %s)", (res, tok))
            m.deferred.append((res, tok))
        elif r < 0.58:
            res = self.res()
            rows = self.step("SELECT fence_forget(%s)", (res,))
            self.expect(f"fence_forget({res})", m.forget(res), rows[0][0])
        elif r < 0.72:
            name = f"s{len(m.savepoints)}_{self.ops}"
            self.step(f"SAVEPOINT {name}")
            m.savepoint(name)
        elif r < 0.80 and m.savepoints:
            i = self.rng.randrange(len(m.savepoints))
            self.step(f"ROLLBACK TO SAVEPOINT {m.savepoints[i][0]}")
            m.rollback_to(i)
        elif r < 0.86 and m.savepoints:
            i = self.rng.randrange(len(m.savepoints))
            self.step(f"RELEASE SAVEPOINT {m.savepoints[i][0]}")
            m.release(i)
        else:
            res = self.res()
            self.check_reads(res)
            self.check_other(res)
        if m.cur is not None and self.rng.random() < 0.3:
            self.check_reads(self.rng.choice(self.hot))

    def end(self):
        m = self.model
        r = self.rng.random()
        if r < 0.55:
            self.step("COMMIT")
            m.commit()
        elif r < 0.75:
            self.step("ROLLBACK")
            m.rollback()
        else:
            gid = f"m33_{SEED}_{self.k}"
            self.step(f"PREPARE TRANSACTION '{gid}'")
            if r < 0.9:
                self.step(f"COMMIT PREPARED '{gid}'")
                m.commit(prepared=True)
            else:
                self.step(f"ROLLBACK PREPARED '{gid}'")
                m.rollback()

    def run(self):
        for _ in range(self.rng.randint(2, 6)):
            self.step("BEGIN")
            self.model.begin()
            for _ in range(self.rng.randint(3, 40)):
                self.op()
                if self.model.cur is None:
                    break
            if self.model.cur is not None:
                self.end()
            for res in self.hot:
                self.check_other(res)
        rows = self.step(
            "SELECT resource, token::text FROM fence_marks WHERE resource LIKE %s",
            (f"h{self.k}:%",))
        self.expect("the committed marks", self.model.committed,
                    {r: int(t) for r, t in rows})


def main():
    conn = psycopg2.connect("")
    conn.autocommit = True
    other = psycopg2.connect("")
    other.autocommit = True
    cur = conn.cursor()
    global PRELOADED
    cur.execute("SELECT 'fencing' = ANY (string_to_array(current_setting('shared_preload_libraries'), ','))")
    PRELOADED = cur.fetchone()[0]
    cur.execute("SET client_min_messages = warning")
    cur.execute(SETUP)
    cur.close()

    start = time.monotonic()
    ks = [int(ONLY)] if ONLY is not None else range(HISTORIES)
    done = ops = 0
    for k in ks:
        if ONLY is None and time.monotonic() - start > SECONDS:
            break
        h = History(conn, other, k)
        try:
            h.run()
        except Failure as e:
            print(f"not ok - marks model, seed {SEED}: history {k} fails: {e}")
            print(f"#   replay: MODEL_SEED={SEED} MODEL_ONLY={k}; its last statements:")
            for line in h.log[-int(os.environ.get("MODEL_TAIL", "25")):]:
                print(f"#   {line}")
            return 1
        done += 1
        ops += h.ops
    print(f"ok - marks model, seed {SEED}: {done} histories, {ops} operations agree with the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
