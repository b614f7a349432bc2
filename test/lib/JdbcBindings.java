// test/lib/JdbcBindings.java: each binding of a token parameter in the
// README's table (doc/clients.md "Java (JDBC, HikariCP)"), through pgJDBC.
//
// Run by test/scripts/java_clients.sh with JDBC_URL set; prints one
// "ok - ..." or "not ok - ..." line per check and exits non-zero if any
// failed.  Uses table bind_orders (order_id int, tok fence_token), guarded
// per row, with row 1 at a token below 100: every token bound here is
// higher than the last.
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;

public class JdbcBindings {
    static int failed = 0;
    static long next = 100;

    interface Binder {
        void bind(PreparedStatement ps, long token) throws SQLException;
    }

    // The SQLSTATE of sql, whose one parameter is the next token, bound by
    // b, in a transaction of its own ("00000" on success).
    static String run(Connection c, String sql, Binder b) throws SQLException {
        c.setAutoCommit(false);
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            b.bind(ps, next++);
            ps.execute();
            c.commit();
            return "00000";
        } catch (SQLException e) {
            c.rollback();
            return e.getSQLState();
        }
    }

    static void expect(String desc, String want, String got) {
        if (want.equals(got)) {
            System.out.println("ok - " + desc);
        } else {
            failed++;
            System.out.println("not ok - " + desc);
            System.out.println("#   expected: " + want + "\n#        got: " + got);
        }
    }

    public static void main(String[] args) throws SQLException {
        String url = System.getenv("JDBC_URL");
        String update = "UPDATE bind_orders SET tok = ? WHERE order_id = 1";
        String insert = "INSERT INTO bind_orders SELECT max(order_id) + 1, ? FROM bind_orders";
        String use = "SELECT fence_use('bind:1', ?, is_local => true)";
        String useCast = "SELECT fence_use('bind:1', ?::fence_token, is_local => true)";
        // the hand-written pattern's comparison with a token column
        String below = "SELECT count(*) FROM bind_orders WHERE tok < ?";

        Binder setLong = (ps, t) -> ps.setLong(1, t);
        Binder setString = (ps, t) -> ps.setString(1, Long.toString(t));
        Binder setBigInteger = (ps, t) -> ps.setObject(1, BigInteger.valueOf(t));
        Binder setOther = (ps, t) -> ps.setObject(1, Long.toString(t), Types.OTHER);

        try (Connection c = DriverManager.getConnection(url)) {
            expect("setLong into a token column", "00000", run(c, update, setLong));
            expect("setString into a token column (UPDATE ... SET tok = ?)", "00000", run(c, update, setString));
            expect("setString into a token column (INSERT)", "00000", run(c, insert, setString));
            expect("setObject(BigInteger) into a token column", "00000", run(c, update, setBigInteger));
            expect("setObject(String, Types.OTHER) into a token column", "00000", run(c, update, setOther));
            expect("setLong in fence_use", "00000", run(c, use, setLong));
            expect("setString in fence_use: 42883", "42883", run(c, use, setString));
            expect("setString in fence_use with ?::fence_token", "00000", run(c, useCast, setString));
            expect("setObject(BigInteger) in fence_use: 42883", "42883", run(c, use, setBigInteger));
            expect("setObject(BigInteger) in fence_use with ?::fence_token", "00000", run(c, useCast, setBigInteger));
            expect("setObject(String, Types.OTHER) in fence_use", "00000", run(c, use, setOther));
            expect("setLong in WHERE tok < ?", "00000", run(c, below, setLong));
            expect("setString in WHERE tok < ?: 42883", "42883", run(c, below, setString));
            expect("setObject(BigInteger) in WHERE tok < ?: 42883", "42883", run(c, below, setBigInteger));
            expect("setObject(String, Types.OTHER) in WHERE tok < ?", "00000", run(c, below, setOther));
            expect("a stale token bound with setString is rejected: TF001", "TF001",
                run(c, update, (ps, t) -> ps.setString(1, "99")));

            try (ResultSet rs = c.createStatement().executeQuery("SELECT tok FROM bind_orders WHERE order_id = 1")) {
                rs.next();
                expect("getColumnClassName of a token", "java.lang.String", rs.getMetaData().getColumnClassName(1));
                expect("getObject of a token", "org.postgresql.util.PGobject", rs.getObject(1).getClass().getName());
                expect("getLong and getString agree", rs.getString(1), Long.toString(rs.getLong(1)));
            }
        }
        try (Connection c = DriverManager.getConnection(url + "&stringtype=unspecified")) {
            expect("stringtype=unspecified: setString in fence_use", "00000", run(c, use, setString));
            expect("stringtype=unspecified: setString into a token column", "00000", run(c, update, setString));
            expect("stringtype=unspecified: setString in WHERE tok < ?", "00000", run(c, below, setString));
        }
        System.out.println("# " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
