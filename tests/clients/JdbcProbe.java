// MariaDB Connector/J (Debian's libmariadb-java) against a running Tethys:
// what Metabase and other Java tools do on connect and sync.
// Usage: java -cp mariadb-java-client.jar JdbcProbe.java PORT SQL_FILE
// Exits non-zero on the first mismatch.

import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.*;
import java.util.*;

public class JdbcProbe {
    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void eq(Object got, Object want, String what) {
        check(Objects.equals(got, want), what + ": got " + got + ", want " + want);
    }

    static final String[] COLUMNS = {"k", "b", "ti", "si", "i", "bi", "li", "f", "d", "amount", "dt", "ts", "ts3", "c", "v", "s"};
    // java.sql.Types of each column, as getColumns reports them.
    static final int[] TYPES = {Types.INTEGER, Types.BIT, Types.TINYINT, Types.SMALLINT, Types.INTEGER, Types.BIGINT,
        Types.DECIMAL, Types.REAL, Types.DOUBLE, Types.DECIMAL, Types.DATE, Types.TIMESTAMP, Types.TIMESTAMP,
        Types.CHAR, Types.VARCHAR, Types.LONGVARCHAR};

    static void checkRow(ResultSet rs, String where) throws SQLException {
        eq(rs.getInt("k"), 1, where + " k");
        eq(rs.getBoolean("b"), true, where + " b");
        eq(rs.getByte("ti"), (byte) -5, where + " ti");
        eq(rs.getShort("si"), (short) 300, where + " si");
        eq(rs.getInt("i"), 70000, where + " i");
        eq(rs.getLong("bi"), 9000000000L, where + " bi");
        eq(rs.getBigDecimal("li"), new BigDecimal("12345678901234567890123456789012345678"), where + " li");
        eq(rs.getFloat("f"), 1.5f, where + " f");
        eq(rs.getDouble("d"), 2.25, where + " d");
        eq(rs.getBigDecimal("amount"), new BigDecimal("12345.678"), where + " amount");
        eq(rs.getDate("dt").toString(), "2026-08-01", where + " dt");
        eq(rs.getTimestamp("ts").toString(), "2026-08-01 10:20:30.0", where + " ts");
        eq(rs.getTimestamp("ts3").toString(), "2026-08-01 10:20:30.123", where + " ts3");
        eq(rs.getString("c"), "ab", where + " c");
        eq(rs.getString("v"), "héllo 'q'", where + " v");
        eq(rs.getString("s"), "long text", where + " s");
    }

    static void probe(int port, String sqlFile, boolean serverPrep) throws Exception {
        String db = serverPrep ? "jdbc_sp" : "jdbc_cp";
        String base = "jdbc:mariadb://127.0.0.1:" + port + "/";
        try (Connection c = DriverManager.getConnection(base + "?user=root&password=")) {
            c.createStatement().execute("CREATE DATABASE " + db);
        }
        String url = base + db + "?user=root&password=&useServerPrepStmts=" + serverPrep
            + "&rewriteBatchedStatements=true";
        try (Connection c = DriverManager.getConnection(url)) {
            Statement st = c.createStatement();
            for (String sql : Files.readString(Path.of(sqlFile)).split(";\n")) {
                if (!sql.isBlank()) st.execute(sql);
            }
            try (ResultSet rs = st.executeQuery("SELECT * FROM all_types ORDER BY k")) {
                check(rs.next(), "row 1");
                checkRow(rs, "text");
                check(rs.next(), "row 2");
                rs.getObject("v");
                check(rs.wasNull(), "NULL v");
            }
            // A prepared statement with parameters (binary protocol with useServerPrepStmts=true).
            try (PreparedStatement ps = c.prepareStatement("SELECT * FROM all_types WHERE k = ? AND v = ?")) {
                ps.setInt(1, 1);
                ps.setString(2, "héllo 'q'");
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next(), "prepared row");
                    checkRow(rs, "prepared");
                    check(!rs.next(), "one prepared row");
                }
            }
            // A batch insert (rewritten into one multi-row INSERT).
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO all_types (k, v, amount) VALUES (?, ?, ?)")) {
                for (int k = 10; k < 15; k++) {
                    ps.setInt(1, k);
                    ps.setString(2, "batch " + k);
                    ps.setBigDecimal(3, new BigDecimal(k + ".5"));
                    ps.addBatch();
                }
                ps.executeBatch();
            }
            try (ResultSet rs = st.executeQuery("SELECT count(*), sum(amount) FROM all_types WHERE k >= 10")) {
                check(rs.next(), "batch count");
                eq(rs.getLong(1), 5L, "batch rows");
                eq(rs.getBigDecimal(2), new BigDecimal("62.500"), "batch sum");
            }
            try {
                st.executeQuery("SELECT * FROM missing");
                throw new AssertionError("missing table must fail");
            } catch (SQLException e) {
                eq(e.getErrorCode(), 1146, "missing table code");
            }

            // DatabaseMetaData, as Metabase's sync reads it.
            DatabaseMetaData md = c.getMetaData();
            List<String> cats = new ArrayList<>();
            try (ResultSet rs = md.getCatalogs()) {
                while (rs.next()) cats.add(rs.getString("TABLE_CAT"));
            }
            check(cats.contains(db) && cats.contains("information_schema"), "catalogs " + cats);
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(db, null, "%", new String[] {"TABLE"})) {
                while (rs.next()) {
                    tables.add(rs.getString("TABLE_NAME"));
                    eq(rs.getString("REMARKS"), "every type", "table remarks");
                }
            }
            eq(tables, List.of("all_types"), "tables");
            int n = 0;
            try (ResultSet rs = md.getColumns(db, null, "all_types", "%")) {
                while (rs.next()) {
                    eq(rs.getString("COLUMN_NAME"), COLUMNS[n], "column " + n);
                    eq(rs.getInt("DATA_TYPE"), TYPES[n], "JDBC type of " + COLUMNS[n]);
                    eq(rs.getInt("ORDINAL_POSITION"), n + 1, "position of " + COLUMNS[n]);
                    if (n == 0) {
                        eq(rs.getString("REMARKS"), "the key", "column remarks");
                        eq(rs.getString("IS_NULLABLE"), "NO", "k not null");
                    }
                    if (COLUMNS[n].equals("amount")) {
                        eq(rs.getInt("COLUMN_SIZE"), 12, "decimal precision");
                        eq(rs.getInt("DECIMAL_DIGITS"), 3, "decimal scale");
                    }
                    if (COLUMNS[n].equals("v")) eq(rs.getInt("COLUMN_SIZE"), 20, "varchar length");
                    n++;
                }
            }
            eq(n, COLUMNS.length, "every column");
            try (ResultSet rs = md.getPrimaryKeys(db, null, "all_types")) {
                check(!rs.next(), "Doris reports no PRIMARY KEY");
            }
            try (ResultSet rs = md.getImportedKeys(db, null, "all_types")) {
                check(!rs.next(), "no foreign keys");
            }
            List<String> idx = new ArrayList<>();
            try (ResultSet rs = md.getIndexInfo(db, null, "all_types", false, false)) {
                while (rs.next()) idx.add(rs.getString("INDEX_NAME") + ":" + rs.getString("COLUMN_NAME") + ":" + rs.getBoolean("NON_UNIQUE"));
            }
            eq(idx, List.of("UNIQUE:k:false"), "index info (the unique key)");
            toolQueries(c, db);
        }
    }

    static List<List<String>> rows(Connection c, String sql, String... params) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) ps.setString(i + 1, params[i]);
            try (ResultSet rs = ps.executeQuery()) {
                int n = rs.getMetaData().getColumnCount();
                List<List<String>> out = new ArrayList<>();
                while (rs.next()) {
                    List<String> row = new ArrayList<>();
                    for (int i = 1; i <= n; i++) row.add(rs.getString(i));
                    out.add(row);
                }
                return out;
            }
        }
    }

    // The statements DBeaver's MySQL navigator (plugins/org.jkiss.dbeaver.ext.mysql:
    // MySQLDataSource, MySQLCatalog, MySQLTable) and Metabase's MySQL driver
    // (src/metabase/driver/mysql.clj) send, in their words.
    static void toolQueries(Connection c, String db) throws SQLException {
        check(!rows(c, "SHOW ENGINES").isEmpty(), "SHOW ENGINES");
        eq(rows(c, "SHOW CHARSET").get(0).get(0), "utf8mb4", "SHOW CHARSET");
        check(rows(c, "SHOW COLLATION").stream().anyMatch(r -> r.get(0).equals("utf8mb4_0900_bin")), "SHOW COLLATION");
        check(rows(c, "SELECT * FROM information_schema.SCHEMATA").stream().anyMatch(r -> r.get(1).equals(db)), "SCHEMATA");
        eq(rows(c, "SELECT DATABASE()").get(0).get(0), db, "current database");
        eq(rows(c, "SHOW FULL TABLES FROM `" + db + "`"), List.of(List.of("all_types", "BASE TABLE")), "SHOW FULL TABLES");
        List<List<String>> cols = rows(c, "SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=? AND TABLE_NAME=? ORDER BY ORDINAL_POSITION", db, "all_types");
        eq(cols.size(), COLUMNS.length, "information_schema.COLUMNS rows");
        eq(cols.get(9).get(15), "decimal(12,3)", "COLUMN_TYPE of amount");
        List<List<String>> idx = rows(c, "SELECT * FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=? AND TABLE_NAME=? ORDER BY INDEX_NAME,SEQ_IN_INDEX", db, "all_types");
        eq(idx.size(), 1, "STATISTICS rows");
        eq(idx.get(0).get(7), "k", "STATISTICS column");
        check(rows(c, "SELECT kc.CONSTRAINT_NAME,kc.TABLE_NAME,kc.COLUMN_NAME,kc.ORDINAL_POSITION\n"
            + "FROM INFORMATION_SCHEMA.KEY_COLUMN_USAGE kc WHERE kc.TABLE_SCHEMA=? AND kc.REFERENCED_TABLE_NAME IS NULL AND kc.TABLE_NAME=?\n"
            + "ORDER BY kc.CONSTRAINT_NAME,kc.ORDINAL_POSITION", db, "all_types").isEmpty(), "KEY_COLUMN_USAGE");
        check(rows(c, "SELECT * FROM information_schema.ROUTINES\nWHERE ROUTINE_SCHEMA=?\nORDER BY ROUTINE_NAME", db).isEmpty(), "ROUTINES");
        check(rows(c, "SHOW FULL TRIGGERS FROM `" + db + "`").isEmpty(), "SHOW FULL TRIGGERS");
        check(rows(c, "SELECT * FROM information_schema.EVENTS WHERE EVENT_SCHEMA=?", db).isEmpty(), "EVENTS");
        List<List<String>> status = rows(c, "SHOW TABLE STATUS FROM `" + db + "` LIKE 'all_types'");
        eq(status.get(0).size(), 18, "SHOW TABLE STATUS columns");
        eq(status.get(0).get(17), "every type", "SHOW TABLE STATUS comment");
        check(rows(c, "SHOW CREATE TABLE `" + db + "`.`all_types`").get(0).get(1).contains("UNIQUE KEY(`k`)"), "SHOW CREATE TABLE");
        // Metabase: the database's time zone, the session's, and whether a table can be read.
        List<String> tz = rows(c, "SELECT @@GLOBAL.time_zone AS global_tz, @@system_time_zone AS system_tz,"
            + " time_format(   timediff(      now(), convert_tz(now(), @@GLOBAL.time_zone, '+00:00')   ),   '%H:%i' ) AS offset;").get(0);
        eq(tz, List.of("UTC", "UTC", "00:00"), "Metabase's time zone query");
        c.createStatement().execute("SET @@session.time_zone = 'UTC';");
        eq(rows(c, "SELECT TRUE AS _ FROM `" + db + "`.`all_types` WHERE 1 <> 1 LIMIT 0").size(), 0, "Metabase's read check");
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        probe(port, args[1], true);
        probe(port, args[1], false);
        System.out.println("jdbc ok");
    }
}
