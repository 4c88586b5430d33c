// Node's mysql2 against a running Tethys: query, execute (server-side
// prepared statements), pooled connections and the OK packet's info.
// Usage: node probe.js PORT SQL_FILE. Exits non-zero on the first mismatch.
'use strict';
const assert = require('assert');
const fs = require('fs');
const mysql = require('mysql2/promise');

const [port, sqlFile] = [Number(process.argv[2]), process.argv[3]];

const EXPECTED = {
  k: 1, b: 1, ti: -5, si: 300, i: 70000, bi: 9000000000,
  li: '12345678901234567890123456789012345678', f: 1.5, d: 2.25, amount: '12345.678',
  dt: '2026-08-01', ts: '2026-08-01 10:20:30', ts3: '2026-08-01 10:20:30.123',
  c: 'ab', v: "héllo 'q'", s: 'long text',
};

function checkRow(row, where) {
  for (const [name, want] of Object.entries(EXPECTED)) {
    assert.deepStrictEqual(row[name], want, `${where}: column ${name}`);
  }
}

async function main() {
  // Dates as strings, so the check does not depend on the machine's zone.
  const opts = { host: '127.0.0.1', port, user: 'root', password: '', dateStrings: true, supportBigNumbers: true };
  const c = await mysql.createConnection(opts);
  await c.query('CREATE DATABASE node_db');
  await c.query('USE node_db');
  for (const sql of fs.readFileSync(sqlFile, 'utf8').split(';\n')) {
    if (sql.trim()) await c.query(sql);
  }
  const [rows, fields] = await c.query('SELECT * FROM all_types ORDER BY k');
  checkRow(rows[0], 'query');
  assert.ok(Object.values(rows[1]).slice(1).every((v) => v === null), 'NULL row');
  assert.strictEqual(fields.length, 16);
  // execute: COM_STMT_PREPARE / EXECUTE with parameters.
  const [prepared] = await c.execute('SELECT * FROM all_types WHERE k = ? AND v = ?', [1, "héllo 'q'"]);
  assert.strictEqual(prepared.length, 1);
  checkRow(prepared[0], 'execute');
  // The OK packet of an INSERT: affected rows and Doris' label info.
  const [ok] = await c.execute('INSERT INTO all_types (k, v) VALUES (?, ?)', [3, 'three']);
  assert.strictEqual(ok.affectedRows, 1);
  assert.ok(ok.info.startsWith("{'label':'"), `info: ${JSON.stringify(ok.info)}`);
  await assert.rejects(c.query('SELECT * FROM missing'), (e) => e.errno === 1146);
  await c.end();
  // Pooled connections, several at once.
  const pool = mysql.createPool({ ...opts, database: 'node_db', connectionLimit: 4 });
  const counts = await Promise.all([1, 2, 3, 4, 5, 6].map(async (k) => {
    const [r] = await pool.query('SELECT count(*) AS n FROM all_types WHERE k <= ?', [k]);
    return Number(r[0].n);
  }));
  assert.deepStrictEqual(counts, [1, 2, 3, 3, 3, 3]);
  const [cols] = await pool.query(
    "SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type FROM information_schema.columns " +
    "WHERE TABLE_SCHEMA = 'node_db' AND TABLE_NAME = 'all_types' ORDER BY ORDINAL_POSITION");
  assert.deepStrictEqual(cols.map((r) => r.name), Object.keys(EXPECTED));
  await pool.end();
  console.log('node mysql2 ok');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
