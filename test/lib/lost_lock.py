"""The lost-lock story, told by two real client sessions.

Client A takes the lock on order 42 and gets token 33, then stalls (a GC
pause, swap, a slow network) for longer than the lock's lease.  Client B
takes the lock, gets token 34 and ships the order.  A wakes up and writes
with the token it still believes in: the database rejects it, and B's work
survives.

Connection parameters come from the environment (PGHOST, PGPORT, ...).
"""
import sys
import textwrap

import psycopg2


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
        cur.execute("""
            CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders
                FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}')""")
        cur.execute("DELETE FROM fence_high_water WHERE resource = 'order:42'")
        cur.execute("INSERT INTO orders VALUES (42, 'paid', 1)")

    print("The table is fenced:")
    print("  CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders")
    print("      FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');")
    print()

    a = psycopg2.connect("application_name=client_a")
    b = psycopg2.connect("application_name=client_b")
    a.autocommit = b.autocommit = True

    # The lock service hands out 33, then (after A's lease ran out) 34.
    say("A", "acquires the lock on order 42: token 33")
    a.cursor().execute("SELECT fence_use('order:42', 33)")
    say("A", "...pauses for longer than the lock's lease (GC, swap, network)")
    say("B", "acquires the lock on order 42: token 34")
    b.cursor().execute("SELECT fence_use('order:42', 34)")
    b.cursor().execute("UPDATE orders SET status = 'shipped' WHERE order_id = 42")
    say("B", "UPDATE orders SET status = 'shipped' WHERE order_id = 42  -> ok")
    say("A", "wakes up, still believing it holds the lock:")
    say("A", "UPDATE orders SET status = 'refunded' WHERE order_id = 42")

    rejected = False
    try:
        a.cursor().execute(
            "UPDATE orders SET status = 'refunded' WHERE order_id = 42")
    except psycopg2.Error as e:
        rejected = e.pgcode == "FN001"
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
