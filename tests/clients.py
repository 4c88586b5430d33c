"""Real Python MySQL drivers against a running Tethys: PyMySQL and
mysql-connector-python (pure Python), text and server-side prepared statements.
Usage: clients.py PORT. Exits non-zero on the first mismatch."""
import datetime
import decimal
import sys

import mysql.connector
import pymysql

port = int(sys.argv[1])

# PyMySQL: the connect chatter, DDL, INSERT, and typed results.
c = pymysql.connect(host="127.0.0.1", port=port, user="root", password="", autocommit=True)
cur = c.cursor()
cur.execute("SELECT @@version_comment LIMIT 1")
assert cur.fetchone()[0].startswith("Tethys"), "version comment"
cur.execute("CREATE DATABASE py")
cur.execute("USE py")
cur.execute(
    "CREATE TABLE t (k INT NOT NULL, s VARCHAR(20), d DECIMAL(10,2), day DATE, ts DATETIME, f DOUBLE, b BOOLEAN) "
    "DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 3"
)
n = cur.execute(
    "INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s), (2, NULL, NULL, NULL, NULL, NULL, NULL)",
    (1, "héllo 'q'", decimal.Decimal("12.34"), datetime.date(2026, 8, 1), datetime.datetime(2026, 8, 1, 10, 20, 30), 0.5, True),
)
assert n == 2, n
cur.execute("SELECT k, s, d, day, ts, f, b FROM t ORDER BY k")
rows = cur.fetchall()
assert rows[0] == (1, "héllo 'q'", decimal.Decimal("12.34"), datetime.date(2026, 8, 1), datetime.datetime(2026, 8, 1, 10, 20, 30), 0.5, 1), rows[0]
assert rows[1] == (2, None, None, None, None, None, None), rows[1]
cur.execute("SELECT DATABASE()")
assert cur.fetchone()[0] == "py"
try:
    cur.execute("SELECT * FROM missing")
    raise AssertionError("missing table must fail")
except pymysql.err.ProgrammingError as e:
    assert e.args[0] == 1146, e.args
c.close()

# mysql-connector-python, pure Python implementation; prepared statements use the binary protocol.
c = mysql.connector.connect(host="127.0.0.1", port=port, user="root", password="", database="py", use_pure=True)
cur = c.cursor()
cur.execute("SELECT count(*), sum(d) FROM t")
assert cur.fetchone() == (2, decimal.Decimal("12.34"))
pc = c.cursor(prepared=True)
pc.execute("SELECT k, s, day, ts FROM t WHERE k = %s", (1,))
row = pc.fetchone()
assert row[0] == 1 and row[1] == "héllo 'q'", row
assert row[2] == datetime.date(2026, 8, 1), row
assert row[3] == datetime.datetime(2026, 8, 1, 10, 20, 30), row
cur.execute("INSERT INTO t (k, s) VALUES (%s, %s)", (3, "three"))
c.commit()
cur.execute("SELECT s FROM t WHERE k = 3")
assert cur.fetchone() == ("three",)
c.close()
print("python clients ok")
