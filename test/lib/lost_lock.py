"""The lost-lock story, told by two real client sessions.

Client A takes the lock on order 42 from Redis with fenced_acquire() and a
short lease, then stalls (a GC pause, swap, a slow network) for longer than
the lease.  The lock expires; client B takes it and a higher token, and
ships the order.  A wakes up and writes with the token it still believes
in: the database rejects it, and B's work survives.

Connection parameters come from the environment (PGHOST, PGPORT, ...);
the Redis server from REDIS_HOST (a host or a Unix socket path) and
REDIS_PORT.
"""
import os
import sys
import textwrap
import time

import psycopg2

LEASE_MS = 300


def say(who, text):
    print(f"  [{who}] {text}")


def main():
    admin = psycopg2.connect("")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        cur.execute("DROP TABLE IF EXISTS orders")
        cur.execute("""
            CREATE TABLE orders (
                order_id int PRIMARY KEY,
                status   text NOT NULL,
                tok      fence_token
            )""")
        cur.execute("INSERT INTO orders VALUES (42, 'paid', NULL)")
        cur.execute("""
            CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders
                FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}')""")
        cur.execute("SELECT fence_forget('order:42')")

    print("The table is fenced:")
    print("  CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders")
    print("      FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');")
    print()

    redis = "-c fencing.redis_host={} -c fencing.redis_port={}".format(
        os.environ.get("REDIS_HOST", "127.0.0.1"),
        os.environ.get("REDIS_PORT", "6379"))
    a = psycopg2.connect(application_name="client_a", options=redis)
    b = psycopg2.connect(application_name="client_b", options=redis)
    a.autocommit = b.autocommit = True

    def acquire(conn, ttl):
        with conn.cursor() as cur:
            cur.execute("SELECT fenced_acquire('order:42', ttl => %s, wait => '2 s')",
                        (ttl,))
            return cur.fetchone()[0]

    token_a = acquire(a, f"{LEASE_MS} ms")
    say("A", f"SELECT fenced_acquire('order:42', ttl => '{LEASE_MS} ms')  -> token {token_a}")
    say("A", "...pauses for longer than its lease (GC, swap, network)")
    time.sleep(2 * LEASE_MS / 1000)
    token_b = acquire(b, "30 s")
    say("B", f"SELECT fenced_acquire('order:42', ttl => '30 s')  -> token {token_b}"
        " (A's lease expired)")
    b.cursor().execute("UPDATE orders SET status = 'shipped' WHERE order_id = 42")
    say("B", "UPDATE orders SET status = 'shipped' WHERE order_id = 42  -> ok")
    b.cursor().execute("SELECT fenced_release('order:42')")
    say("A", "wakes up, still believing it holds the lock:")
    say("A", "UPDATE orders SET status = 'refunded' WHERE order_id = 42")

    rejected = False
    try:
        a.cursor().execute(
            "UPDATE orders SET status = 'refunded' WHERE order_id = 42")
    except psycopg2.Error as e:
        rejected = e.pgcode == "TF001"
        print()
        print(f"  A's client receives SQLSTATE {e.pgcode}:")
        print(textwrap.indent(e.pgerror.rstrip(), "    "))
        print()

    with admin.cursor() as cur:
        cur.execute("SELECT order_id, status, tok FROM orders")
        row = cur.fetchone()
        cur.execute("SELECT fence_mark('order:42')")
        mark = cur.fetchone()[0]
    print(f"The row that survived: order_id={row[0]} status={row[1]!r} tok={row[2]}")
    print(f"High-water mark of order:42: {mark}")

    ok = rejected and row[1] == "shipped"
    print()
    print("B's write survived; A's stale write was rejected." if ok
          else "UNEXPECTED: the stale write was not rejected as it should be.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
