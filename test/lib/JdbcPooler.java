// test/lib/JdbcPooler.java: the fenced read-then-write job through pgJDBC
// and HikariCP, several threads at once, for doc/clients.md "Behind
// pgbouncer" (run by test/scripts/java_clients.sh through pgbouncer in
// transaction mode, with pgJDBC's defaults and with prepareThreshold=0).
//
// Usage: java JdbcPooler URL THREADS JOBS
// Each of THREADS threads borrows a connection from a HikariCP pool of
// THREADS, JOBS times: fenced_acquire_xact('pool:' || n), a read of the
// balance, a write of balance + 1, commit, on accounts 1 and 2 of table
// pooled (id int, balance bigint, tok fence_token, guarded per row) in turn.
// Prints "jobs OK of TOTAL" and "sqlstates" with the SQLSTATEs of the jobs
// that failed, sorted, each once ("-" if none; "busy" for a lock still
// busy after the wait).  The caller compares the
// balances before and after with OK.
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;

public class JdbcPooler {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        int threads = Integer.parseInt(args[1]);
        int jobs = Integer.parseInt(args[2]);
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(url);
        config.setMaximumPoolSize(threads);
        config.setMinimumIdle(threads);
        AtomicInteger done = new AtomicInteger();
        Set<String> states = new TreeSet<>();
        try (HikariDataSource pool = new HikariDataSource(config)) {
            Thread[] workers = new Thread[threads];
            for (int t = 0; t < threads; t++) {
                workers[t] = new Thread(() -> {
                    for (int j = 0; j < jobs; j++) {
                        try {
                            job(pool, 1 + j % 2);
                            done.incrementAndGet();
                        } catch (SQLException e) {
                            synchronized (states) {
                                states.add(String.valueOf(e.getSQLState()));
                            }
                        }
                    }
                });
                workers[t].start();
            }
            for (Thread w : workers)
                w.join();
        }
        System.out.println("jobs " + done.get() + " of " + threads * jobs);
        System.out.println("sqlstates " + (states.isEmpty() ? "-" : String.join(" ", states)));
    }

    static void job(HikariDataSource pool, int id) throws SQLException {
        try (Connection c = pool.getConnection()) {
            c.setAutoCommit(false);
            try {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT fenced_acquire_xact('pool:' || ?, wait => '10s')")) {
                    ps.setInt(1, id);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        rs.getLong(1);
                        if (rs.wasNull())
                            throw new SQLException("the lock is busy", "busy");
                    }
                }
                long balance;
                try (PreparedStatement ps = c.prepareStatement("SELECT balance FROM pooled WHERE id = ?")) {
                    ps.setInt(1, id);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        balance = rs.getLong(1);
                    }
                }
                try (PreparedStatement ps = c.prepareStatement("UPDATE pooled SET balance = ? WHERE id = ?")) {
                    ps.setLong(1, balance + 1);
                    ps.setInt(2, id);
                    ps.executeUpdate();
                }
                c.commit();
            } catch (SQLException e) {
                try {
                    c.rollback();
                } catch (SQLException ignored) {
                    // the connection is broken: HikariCP evicts it
                }
                throw e;
            }
        }
    }
}
