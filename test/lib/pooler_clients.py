"""Two clients behind pgbouncer in transaction mode, one server connection.

Run by test/scripts/pgbouncer.sh, which starts PostgreSQL, redis-server and
pgbouncer (pool_mode = transaction, default_pool_size = 1) and passes:

    python3 pooler_clients.py BOUNCER_PORT WITH_REDIS

Clients X and Y connect through pgbouncer in autocommit mode, so that each
statement outside an explicit BEGIN is a transaction of its own, after
which pgbouncer hands the one server connection to whichever client comes
next.  The table is guarded per resource, order:{order_id}, and holds two
rows of order:61.

What it shows (one "ok - ..." or "not ok - ..." line each):

- the session forms leak: X's fence_use() (and, with Redis, X's
  fenced_acquire()) is seen by Y, whose tokenless UPDATE is accepted and
  stamped with X's token, and whose fenced_release() releases X's lock;
- the transaction forms do not: X's fence_use(..., is_local => true) (and,
  with Redis, X's fenced_acquire_xact()) ends with X's transaction,
  committed or rolled back: Y sees no declaration and no lease, Y's
  tokenless write is rejected (TF002), and the lock is free for Y at once;
- in session mode (the app_session pool, also of one server connection),
  pgbouncer's reset query DISCARD ALL ends X's session forms when X
  disconnects: the next client on that server connection sees no
  declaration and no lease, and the lock is free.

Connection parameters for the direct (set-up) connection come from the
environment (PGHOST, PGPORT, ...).
"""
import sys

import psycopg2

from checks import check, exit_status


def sqlstate(conn, sql, args=None):
    """The SQLSTATE a statement ends with, "00000" on success."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
        return "00000"
    except psycopg2.Error as e:
        if not conn.autocommit:
            conn.rollback()
        return e.pgcode


def one(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0]


def main():
    port, with_redis = sys.argv[1], sys.argv[2] == "1"

    admin = psycopg2.connect("")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        cur.execute("""
            CREATE TABLE items (id int PRIMARY KEY, order_id int, tok fence_token, val text)""")
        cur.execute("""
            CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
                FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}')""")
        cur.execute("INSERT INTO items VALUES (1, 61, 33, 'x'), (2, 61, 33, 'y')")

    dsn = f"host=127.0.0.1 port={port} dbname=app user=postgres"
    x = psycopg2.connect(dsn)
    y = psycopg2.connect(dsn)
    x.autocommit = y.autocommit = True

    check("both clients are served by one server connection",
          one(x, "SELECT pg_backend_pid()"), one(y, "SELECT pg_backend_pid()"))

    # the session form leaks: X declares, Y's tokenless write takes X's token
    one(x, "SELECT fence_use('order:61', 34) IS NULL")
    check("session fence_use: Y sees X's declaration (leak)",
          [("order:61", 34, False)],
          [(r, int(t), l) for r, t, l in
           [tuple(row) for row in _rows(y, "SELECT * FROM fence_declared()")]])
    check("session fence_use: Y's tokenless UPDATE is accepted (leak)", "00000",
          sqlstate(y, "UPDATE items SET val = 'y1' WHERE id = 2"))
    check("session fence_use: ... and stamped with X's token", "34",
          one(y, "SELECT tok::text FROM items WHERE id = 2"))
    one(x, "SELECT fence_use('order:61', NULL) IS NULL")

    # the transaction form does not leak, committed
    x.autocommit = False
    with x.cursor() as cur:
        cur.execute("SELECT fence_use('order:61', 35, is_local => true)")
        cur.execute("UPDATE items SET val = 'x2' WHERE id = 1")
    x.commit()
    x.autocommit = True
    check("local fence_use: X's write in its transaction carries X's token", "35",
          one(x, "SELECT tok::text FROM items WHERE id = 1"))
    check("local fence_use: nothing is declared for Y after X commits", 0,
          one(y, "SELECT count(*) FROM fence_declared()"))
    check("local fence_use: Y's tokenless UPDATE is rejected", "TF002",
          sqlstate(y, "UPDATE items SET val = 'y2' WHERE id = 2"))

    # nor rolled back after an error
    x.autocommit = False
    check("local fence_use: X's transaction fails", "22012",
          sqlstate(x, "SELECT fence_use('order:61', 36, is_local => true), 1 / 0"))
    x.autocommit = True
    check("local fence_use: nothing is declared for Y after X's rollback", 0,
          one(y, "SELECT count(*) FROM fence_declared()"))
    check("local fence_use: Y's tokenless DELETE is rejected", "TF002",
          sqlstate(y, "DELETE FROM items WHERE id = 2"))

    # the token in the statement itself is safe in every mode
    check("a token in the statement needs no declaration", "00000",
          sqlstate(y, "UPDATE items SET val = 'y3', tok = 36 WHERE id = 2"))

    if with_redis:
        # fenced_acquire() is a session form too: X's lease is Y's
        token = int(one(x, "SELECT fenced_acquire('order:61')"))
        check("fenced_acquire: Y's tokenless UPDATE is accepted (leak)", "00000",
              sqlstate(y, "UPDATE items SET val = 'y4' WHERE id = 2"))
        check("fenced_acquire: ... and stamped with X's token", str(token),
              one(y, "SELECT tok::text FROM items WHERE id = 2"))
        check("fenced_acquire: Y's fenced_release releases X's lock (leak)", True,
              one(y, "SELECT fenced_release('order:61')"))
        one(y, "SELECT fence_use('order:61', NULL) IS NULL")

    if with_redis:
        # fenced_acquire_xact() is a transaction form: the lease and its
        # declaration end with X's transaction, committed ...
        x.autocommit = False
        with x.cursor() as cur:
            cur.execute("SELECT fenced_acquire_xact('order:61')")
            token = int(cur.fetchone()[0])
            cur.execute("UPDATE items SET val = 'x5' WHERE id = 1")
        x.commit()
        x.autocommit = True
        check("fenced_acquire_xact: X's write carries X's token", str(token),
              one(x, "SELECT tok::text FROM items WHERE id = 1"))
        check("fenced_acquire_xact: Y holds no lease after X commits", 0,
              one(y, "SELECT count(*) FROM fenced_leases()"))
        check("fenced_acquire_xact: nothing is declared for Y after X commits", 0,
              one(y, "SELECT count(*) FROM fence_declared()"))
        check("fenced_acquire_xact: Y's tokenless UPDATE is rejected", "TF002",
              sqlstate(y, "UPDATE items SET val = 'y5' WHERE id = 2"))
        check("fenced_acquire_xact: Y cannot release X's (already released) lock", False,
              one(y, "SELECT fenced_release('order:61')"))
        check("fenced_acquire_xact: X's commit gave the lock back: Y takes it at once", True,
              one(y, "SELECT fenced_acquire_xact('order:61', wait => '0') IS NOT NULL"))

        # ... or failed and rolled back
        x.autocommit = False
        with x.cursor() as cur:
            cur.execute("SELECT fenced_acquire_xact('order:61')")
        check("fenced_acquire_xact: X's transaction fails", "22012",
              sqlstate(x, "SELECT 1 / 0"))
        x.autocommit = True
        check("fenced_acquire_xact: Y holds no lease after X's rollback", 0,
              one(y, "SELECT count(*) FROM fenced_leases()"))
        check("fenced_acquire_xact: nothing is declared for Y after X's rollback", 0,
              one(y, "SELECT count(*) FROM fence_declared()"))
        check("fenced_acquire_xact: Y's tokenless DELETE is rejected", "TF002",
              sqlstate(y, "DELETE FROM items WHERE id = 2"))
        check("fenced_acquire_xact: X's rollback gave the lock back: Y takes it at once", True,
              one(y, "SELECT fenced_acquire_xact('order:61', wait => '0') IS NOT NULL"))

    # session mode: when X disconnects, pgbouncer resets the server
    # connection with DISCARD ALL before the next client gets it
    sdsn = f"host=127.0.0.1 port={port} dbname=app_session user=postgres"
    sx = psycopg2.connect(sdsn)
    sx.autocommit = True
    sx_pid = one(sx, "SELECT pg_backend_pid()")
    one(sx, "SELECT fence_use('order:61', 40) IS NULL")
    if with_redis:
        one(sx, "SELECT fenced_acquire('order:62') IS NOT NULL")
    sx.close()
    sy = psycopg2.connect(sdsn)
    sy.autocommit = True
    check("session mode: the next client is served by the same server connection",
          sx_pid, one(sy, "SELECT pg_backend_pid()"))
    check("session mode: DISCARD ALL ended X's declaration", 0,
          one(sy, "SELECT count(*) FROM fence_declared()"))
    check("session mode: the next client's tokenless UPDATE is rejected", "TF002",
          sqlstate(sy, "UPDATE items SET val = 's1' WHERE id = 2"))
    if with_redis:
        check("session mode: DISCARD ALL ended X's lease", 0,
              one(sy, "SELECT count(*) FROM fenced_leases()"))
        check("session mode: ... and gave its lock back: the next client takes it at once", True,
              one(sy, "SELECT fenced_acquire_xact('order:62', wait => '0') IS NOT NULL"))
    sy.close()

    x.close()
    y.close()
    with admin.cursor() as cur:
        cur.execute("DROP TABLE items")
        cur.execute("DELETE FROM fence_high_water")
    return exit_status()


def _rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


if __name__ == "__main__":
    sys.exit(main())
