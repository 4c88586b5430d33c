"""Python MySQL clients against a running Tethys, as a user would use them.

Usage: python_probe.py PORT CLIENT, CLIENT one of pymysql, connector-pure,
connector-c, sqlalchemy. Each creates its own database, loads every Doris
type (tests/clients/all_types.sql), reads every value back with its Python
type, runs a statement with parameters, and reads the metadata the client
(or a BI tool on top of it) asks for. Exits non-zero on the first mismatch.
"""
import datetime
import decimal
import os
import sys

PORT = int(sys.argv[1])
CLIENT = sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
DB = "py_" + CLIENT.replace("-", "_")

EXPECTED = {
    "k": 1,
    "b": 1,
    "ti": -5,
    "si": 300,
    "i": 70000,
    "bi": 9000000000,
    "li": decimal.Decimal("12345678901234567890123456789012345678"),
    "f": 1.5,
    "d": 2.25,
    "amount": decimal.Decimal("12345.678"),
    "dt": datetime.date(2026, 8, 1),
    "ts": datetime.datetime(2026, 8, 1, 10, 20, 30),
    "ts3": datetime.datetime(2026, 8, 1, 10, 20, 30, 123000),
    "c": "ab",
    "v": "héllo 'q'",
    "s": "long text",
}
COLUMNS = list(EXPECTED)


def statements():
    with open(os.path.join(HERE, "all_types.sql"), encoding="utf-8") as f:
        return [s.strip() for s in f.read().split(";\n") if s.strip()]


def check_row(row, where, reflected=False):
    got = dict(zip(COLUMNS, row))
    for name, want in EXPECTED.items():
        value = got[name]
        if name == "b" and isinstance(value, bool):
            value = int(value)
        # SQLAlchemy's reflected MySQL DOUBLE returns Decimal (asdecimal=True).
        if reflected and isinstance(want, float) and isinstance(value, decimal.Decimal):
            value = float(value)
        assert value == want and type(value) is type(want), (
            f"{where}: column {name}: got {value!r} ({type(value).__name__}), "
            f"want {want!r} ({type(want).__name__})"
        )


def check_nulls(row, where):
    assert row[0] == 2 and all(v is None for v in row[1:]), f"{where}: {row!r}"


def dbapi_probe(conn, paramstyle_marker, prepared_cursor=None):
    """What every DB-API driver must do: DDL, typed round trip, parameters."""
    cur = conn.cursor()
    cur.execute("SELECT @@version_comment LIMIT 1")
    assert cur.fetchone()[0].startswith("Tethys"), "version comment"
    cur.execute(f"CREATE DATABASE {DB}")
    cur.execute(f"USE {DB}")
    for stmt in statements():
        cur.execute(stmt)
    cur.execute("SELECT DATABASE()")
    assert cur.fetchone()[0] == DB
    # A NULL literal is NULL, not the text 'NULL'.
    cur.execute("SELECT NULL, NULL AS x")
    assert cur.fetchone() == (None, None)
    cur.execute(f"SELECT {', '.join(COLUMNS)} FROM all_types ORDER BY k")
    rows = cur.fetchall()
    check_row(rows[0], "text protocol")
    check_nulls(rows[1], "text protocol")
    # Parameters: an INSERT and a SELECT.
    m = paramstyle_marker
    n = cur.execute(
        f"INSERT INTO all_types (k, v, amount, dt, ts) VALUES ({m}, {m}, {m}, {m}, {m})",
        (3, "it's", decimal.Decimal("-1.5"), datetime.date(2026, 1, 2), datetime.datetime(2026, 1, 2, 3, 4, 5)),
    )
    conn.commit()
    cur.execute(f"SELECT v, amount, dt, ts FROM all_types WHERE k = {m} AND v = {m}", (3, "it's"))
    assert cur.fetchone() == ("it's", decimal.Decimal("-1.500"), datetime.date(2026, 1, 2), datetime.datetime(2026, 1, 2, 3, 4, 5))
    if prepared_cursor is not None:
        pc = prepared_cursor()
        pc.execute(f"SELECT {', '.join(COLUMNS)} FROM all_types WHERE k = %s", (1,))
        check_row(pc.fetchone(), "binary protocol")
        pc.execute(f"SELECT {', '.join(COLUMNS)} FROM all_types WHERE k = %s", (2,))
        check_nulls(pc.fetchone(), "binary protocol")
    # A missing table is MySQL's error 1146.
    try:
        cur.execute("SELECT * FROM missing")
        raise AssertionError("missing table must fail")
    except Exception as e:  # driver-specific class; the code is what matters
        code = getattr(e, "errno", None) or e.args[0]
        assert code == 1146, e
    # The metadata tools read.
    cur.execute(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLUMN_KEY, COLUMN_COMMENT "
        "FROM information_schema.columns WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'all_types' "
        "ORDER BY ORDINAL_POSITION".replace("%s", m),
        (DB,),
    )
    cols = cur.fetchall()
    assert [c[0] for c in cols] == COLUMNS, cols
    assert cols[0][1:] == ("int", "int(11)", "UNI", "the key"), cols[0]
    assert cols[9][1:4] == ("decimal", "decimal(12,3)", ""), cols[9]
    cur.execute(f"SHOW FULL COLUMNS FROM all_types LIKE 'b'")
    assert cur.fetchone()[-1] == "a flag"
    cur.execute("SHOW TABLE STATUS LIKE 'all_types'")
    status = cur.fetchone()
    assert len(status) == 18 and status[0] == "all_types" and status[-1] == "every type", status
    assert int(status[4]) == 3, f"Rows: {status!r}"
    return cur


def pymysql_probe():
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=PORT, user="root", password="", autocommit=True)
    cur = dbapi_probe(conn, "%s")
    # The OK packet's info (Doris' label) reaches the client intact.
    cur.execute(f"INSERT INTO all_types (k) VALUES (4)")
    info = conn._result.message.decode() if conn._result.message else ""
    assert "'label':'" in info, info
    conn.close()


def connector_probe(use_pure):
    import mysql.connector

    conn = mysql.connector.connect(
        host="127.0.0.1", port=PORT, user="root", password="", use_pure=use_pure
    )
    assert (not use_pure) == conn.__class__.__name__.startswith("CMySQL"), conn.__class__
    dbapi_probe(conn, "%s", prepared_cursor=lambda: conn.cursor(prepared=True))
    conn.close()


def sqlalchemy_probe():
    import sqlalchemy as sa
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    root = sa.create_engine(f"mysql+pymysql://root@127.0.0.1:{PORT}/")
    with root.connect() as c:
        c.execute(sa.text(f"CREATE DATABASE {DB}"))
    engine = sa.create_engine(f"mysql+pymysql://root@127.0.0.1:{PORT}/{DB}")
    with engine.connect() as c:
        for stmt in statements():
            c.execute(sa.text(stmt))
        c.commit()
    insp = sa.inspect(engine)
    assert DB in insp.get_schema_names(), insp.get_schema_names()
    assert insp.get_table_names() == ["all_types"], insp.get_table_names()
    assert insp.get_view_names() == [], insp.get_view_names()
    cols = insp.get_columns("all_types")
    assert [c["name"] for c in cols] == COLUMNS, cols
    by = {c["name"]: c for c in cols}
    assert isinstance(by["k"]["type"], sa.Integer) and by["k"]["nullable"] is False, by["k"]
    assert by["k"]["comment"] == "the key", by["k"]
    assert isinstance(by["amount"]["type"], sa.Numeric), by["amount"]
    assert (by["amount"]["type"].precision, by["amount"]["type"].scale) == (12, 3)
    assert isinstance(by["v"]["type"], sa.String) and by["v"]["type"].length == 20, by["v"]
    assert isinstance(by["ts"]["type"], sa.DateTime), by["ts"]
    assert isinstance(by["dt"]["type"], sa.Date), by["dt"]
    # SQLAlchemy reads a table's comment from SHOW CREATE TABLE, where
    # Doris' grammar puts it on its own line after the key clause, so its
    # MySQL parser finds none (as against Doris); information_schema has it.
    assert insp.get_table_comment("all_types") == {"text": None}
    pk = insp.get_pk_constraint("all_types")
    assert pk["constrained_columns"] == [], pk  # Doris reports no PRIMARY KEY
    assert insp.get_foreign_keys("all_types") == []
    indexes = insp.get_indexes("all_types")
    assert isinstance(indexes, list), indexes
    # Core select with a bound parameter.
    t = sa.Table("all_types", sa.MetaData(), autoload_with=engine)
    with engine.connect() as c:
        row = c.execute(sa.select(*[t.c[n] for n in COLUMNS]).where(t.c.k == sa.bindparam("k")), {"k": 1}).one()
    check_row(tuple(row), "sqlalchemy core", reflected=True)

    # An ORM round trip on a table the ORM creates.
    class Base(DeclarativeBase):
        pass

    class Item(Base):
        __tablename__ = "items"
        id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
        name: Mapped[str] = mapped_column(sa.String(30))

    with engine.connect() as c:
        c.execute(sa.text(
            "CREATE TABLE items (id INT NOT NULL, name VARCHAR(30)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1"
        ))
        c.commit()
    with Session(engine) as s:
        s.add_all([Item(id=1, name="one"), Item(id=2, name="two")])
        s.commit()
    with Session(engine) as s:
        names = [i.name for i in s.scalars(sa.select(Item).where(Item.id >= 1).order_by(Item.id))]
        assert names == ["one", "two"], names


PROBES = {
    "pymysql": pymysql_probe,
    "connector-pure": lambda: connector_probe(True),
    "connector-c": lambda: connector_probe(False),
    "sqlalchemy": sqlalchemy_probe,
}

PROBES[CLIENT]()
print(f"{CLIENT} ok")
