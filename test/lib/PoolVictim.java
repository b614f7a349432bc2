// A stalled lock holder behind HikariCP + pgJDBC, for
// test/scripts/pool_takeover.sh: what the application sees when a newer
// holder takes its lock over (TF110), and whether the pool then hands out
// a working connection.
//
//   java PoolVictim JDBC_URL ACCT STALL
//
// A pool of one connection.  The holder borrows it, takes acct:ACCT with
// fenced_acquire_xact(..., ttl => '1 s') in a transaction, writes a
// ledger line, prints "ready" and stalls 4 s: STALL "idle" in the client
// (idle in transaction), "sleep" in SELECT pg_sleep(4).  Then it writes a
// second line and commits, closes the connection (back to the pool),
// borrows one again and runs SELECT 1.  Prints:
//
//   ready
//   error <exception class> <SQLSTATE or -> <closed|open> <message's first line>
//   next <1, or the exception class and message>
//
// "closed" is Connection.isClosed() after the error: HikariCP closes its
// proxy when it evicts the connection on its own; "chained" lists the
// SQLStates of the exceptions chained to it (getNextException), which
// HikariCP also reads.
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

public class PoolVictim {
	static String firstLine(Exception e) {
		String m = String.valueOf(e.getMessage()).trim();
		int nl = m.indexOf('\n');
		return nl < 0 ? m : m.substring(0, nl);
	}

	static String chained(SQLException e) {
		StringBuilder s = new StringBuilder();
		for (SQLException n = e.getNextException(); n != null; n = n.getNextException())
			s.append(' ').append(n.getSQLState());
		return s.length() == 0 ? " -" : s.toString();
	}

	static void write(Connection c, int acct, int amount) throws SQLException {
		try (PreparedStatement ps = c.prepareStatement("INSERT INTO ledger (acct, amount) VALUES (?, ?)")) {
			ps.setInt(1, acct);
			ps.setInt(2, amount);
			ps.executeUpdate();
		}
	}

	public static void main(String[] args) throws Exception {
		HikariConfig config = new HikariConfig();
		config.setJdbcUrl(args[0]);
		config.setMaximumPoolSize(1);
		int acct = Integer.parseInt(args[1]);
		boolean idle = args[2].equals("idle");
		try (HikariDataSource ds = new HikariDataSource(config)) {
			Connection c = ds.getConnection();
			try {
				c.setAutoCommit(false);
				try (PreparedStatement ps = c.prepareStatement("SELECT fenced_acquire_xact(?, ttl => '1 s')")) {
					ps.setString(1, "acct:" + acct);
					ps.executeQuery().close();
				}
				write(c, acct, 1);
				System.out.println("ready");
				System.out.flush();
				if (idle)
					Thread.sleep(4000);
				else
					try (Statement st = c.createStatement()) {
						st.execute("SELECT pg_sleep(4)");
					}
				write(c, acct, 2);
				c.commit();
				System.out.println("error -");
			} catch (SQLException e) {
				boolean closed = c.isClosed();
				System.out.println("error " + e.getClass().getSimpleName() + " "
						+ (e.getSQLState() == null ? "-" : e.getSQLState()) + " "
						+ (closed ? "closed" : "open") + " chained" + chained(e) + " " + firstLine(e));
				// nothing more: HikariCP evicts a connection whose error
				// (or one chained to it) is 08xxx; a cancelled statement's
				// TF110 leaves the connection usable once rolled back
				if (!closed)
					c.rollback();
			} finally {
				c.close();
			}
			try (Connection c2 = ds.getConnection(); Statement st = c2.createStatement();
					ResultSet rs = st.executeQuery("SELECT 1")) {
				rs.next();
				System.out.println("next " + rs.getInt(1));
			} catch (SQLException e) {
				System.out.println("next " + e.getClass().getSimpleName() + " " + firstLine(e));
			}
		}
	}
}
