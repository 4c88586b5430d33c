"""A `tethys standalone` the kill -9 benches start, kill and start again.

    from server import Server
    s = Server(binary, ports)       # a fresh data directory, fixed ports
    s.start()                       # seconds until a query is answered
    s.kill9()
"""

import os
import shutil
import subprocess
import tempfile
import time


class Exited(Exception):
    """The server process ended before it answered a query."""

    def __init__(self, code, log):
        super().__init__(f"tethys exited with {code}; see {log}")
        self.code, self.log = code, log


class Server:
    """A standalone tethys on fixed ports and one data directory."""

    def __init__(self, binary, ports, data_dir=None, db="torture"):
        """`ports`: five free ports (benches/run's `free_ports(5)`)."""
        self.binary, self.db = binary, db
        self.dir = data_dir or tempfile.mkdtemp(prefix="tethys-bench-")
        self.log = open(self.dir + ".log", "ab")
        self.query, self.http, *self.rest = ports
        self.proc = None

    def start(self, limit_s=300):
        """Starts the process; returns seconds until a query is answered.
        Raises `Exited` when the process ends first (a refused start)."""
        import pymysql
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [self.binary, "standalone", "--data-dir", self.dir,
             "--query-port", str(self.query), "--http-port", str(self.http),
             "--be-http-port", str(self.rest[0]), "--be-port", str(self.rest[1]),
             "--fe-rpc-port", str(self.rest[2])],
            stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = started + limit_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Exited(self.proc.returncode, f"{self.dir}.log")
            try:
                c = self.connect(pymysql)
                cur = c.cursor()
                cur.execute("SELECT count(*) FROM information_schema.tables")
                cur.fetchall()
                c.close()
                return time.monotonic() - started
            except pymysql.err.Error:
                time.sleep(0.05)
        raise TimeoutError(f"tethys did not answer within {limit_s} s")

    def connect(self, pymysql, db=None):
        return pymysql.connect(host="127.0.0.1", port=self.query, user="root", database=db,
                               autocommit=True, connect_timeout=5, read_timeout=60)

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        if self.proc:
            self.proc.wait()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def url(self, path):
        return f"http://127.0.0.1:{self.http}/api/{self.db}/{path}"

    def remove(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        os.remove(self.dir + ".log")
