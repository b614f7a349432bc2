"""A real ORM session against a fenced table: SQLAlchemy (Debian's
python3-sqlalchemy), run by test/scripts/app_clients.sh.

SQLAlchemy puts in an UPDATE only the attributes that changed, so a plain
session passes the guard with or without the precedence rule; with
flag_modified() on the token column it writes the loaded token back, the
shape Django's save() and Hibernate send.  Session B holds the lock at 34,
loads the row written at 33, and saves it: the write must carry 34 (before,
it carried 33, the mark stayed 33, and the stale holder A was then
accepted with 33); and a stalled holder that saves the row a newer holder
wrote carries its own declared token, not the echoed newer one.

Prints one "ok - ..." or "not ok - ..." line per assertion; exits non-zero
if any failed.  Connection parameters come from the environment.
"""
import sys

import psycopg2
import sqlalchemy
from sqlalchemy import BigInteger, Column, Integer, Text, text
from sqlalchemy.orm import Session, declarative_base
from sqlalchemy.orm.attributes import flag_modified

from checks import check, exit_status

Base = declarative_base()


class Order(Base):
    __tablename__ = "orm_orders"
    id = Column(Integer, primary_key=True)
    status = Column(Text)
    tok = Column(BigInteger)


def main():
    engine = sqlalchemy.create_engine("postgresql+psycopg2://",
                                      creator=lambda: psycopg2.connect(""))
    with engine.begin() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS fencing"))
        conn.execute(text("CREATE TABLE orm_orders (id int PRIMARY KEY, status text, tok fence_token)"))
        conn.execute(text("""CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orm_orders
            FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'orm:{id}')"""))
        conn.execute(text("INSERT INTO orm_orders VALUES (42, 'paid', 33)"))

    # B: a plain session writes only the changed column; the declared
    # token is stamped
    with Session(engine) as b:
        b.execute(text("SELECT fence_use('orm:42', 34, is_local => true)"))
        order = b.get(Order, 42)
        order.status = "packed"
        b.commit()
    with engine.connect() as conn:
        check("a plain SQLAlchemy session is stamped with the declared token", "34",
              conn.execute(text("SELECT tok::text FROM orm_orders WHERE id = 42")).scalar())

    # B again, at 35, saving every loaded column (flag_modified)
    with Session(engine) as b:
        b.execute(text("SELECT fence_use('orm:42', 35, is_local => true)"))
        order = b.get(Order, 42)
        loaded = order.tok
        order.status = "shipped"
        flag_modified(order, "tok")
        b.commit()
    check("the session loaded the row at 34", 34, int(loaded))
    with engine.connect() as conn:
        check("flag_modified writes the loaded 34 back, the row carries the declared 35", "35",
              conn.execute(text("SELECT tok::text FROM orm_orders WHERE id = 42")).scalar())
        check("the mark is the declared 35", "35",
              conn.execute(text("SELECT fence_mark('orm:42')::text")).scalar())

    # A, the stale holder of 34, saves through its own session
    code = None
    with Session(engine) as a:
        order = a.get(Order, 42)
        order.status = "refunded"
        order.tok = 34
        try:
            a.commit()
        except sqlalchemy.exc.DBAPIError as e:
            code = e.orig.pgcode
    check("the stale holder's save is rejected with TF001", "TF001", code)

    # The stalled holder echoing the newer holder's token: A declared 36
    # and stalled inside its transaction; B took over at 37 and saved; A
    # then loads the row (now at 37) and saves every column.  Its write
    # carries its declared 36, whatever the statement echoes, and is
    # rejected (accepted before 1.2: 37 >= 36 counted as A's token).
    a = Session(engine)
    a.execute(text("SELECT fence_use('orm:42', 36, is_local => true)"))
    with Session(engine) as b:
        b.execute(text("SELECT fence_use('orm:42', 37, is_local => true)"))
        order = b.get(Order, 42)
        order.status = "delivered"
        b.commit()
    order = a.get(Order, 42)
    echoed = order.tok
    order.status = "refunded"
    flag_modified(order, "tok")
    code = None
    try:
        a.commit()
    except sqlalchemy.exc.DBAPIError as e:
        code = e.orig.pgcode
    a.close()
    check("the stalled holder loaded the newer holder's 37", 37, int(echoed))
    check("its save echoing 37 carries its declared 36 and is rejected with TF001", "TF001", code)
    with engine.connect() as conn:
        check("the row keeps the newer holder's work", "delivered|37",
              conn.execute(text("SELECT status || '|' || tok FROM orm_orders WHERE id = 42")).scalar())

    with engine.begin() as conn:
        conn.execute(text("DROP TABLE orm_orders"))
        conn.execute(text("SELECT fence_forget('orm:42')"))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
