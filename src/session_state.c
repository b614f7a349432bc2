/*-------------------------------------------------------------------------
 *
 * session_state.c
 *	  fencing.allow_session_state: whether this session may declare tokens
 *	  and take locks that outlive a transaction.
 *
 * A session declaration (fence_use without is_local) and a session lease
 * (fenced_acquire) belong to the server connection.  A pool that hands
 * the connection to another client hands them over too: the next
 * borrower's tokenless writes are stamped with the first one's token, and
 * its fenced_release() gives back the first one's lock.  The transaction
 * forms cannot leak that way.  Turning the setting off for the roles (or
 * databases) that reach the server through a pool makes the session forms
 * an error there, so that the mistake is found in testing instead of in
 * production.
 *
 * The setting is PGC_SUSET, so that it is set per role or database by a
 * superuser (or a role granted SET on it), and the role itself cannot
 * turn it back on: SET, RESET, set_config() and startup options of an
 * ordinary user are refused once the library is loaded, and a value an
 * ordinary user gave the placeholder before it was loaded is dropped at
 * load time by PostgreSQL (with a WARNING).
 *
 * Dropping it is not enough.  A startup option (PGOPTIONS, "options" in a
 * connection string) outranks the role's and the database's settings, so
 * that the placeholder holds the user's value only: once PostgreSQL drops
 * it, what is left is the default, on.  So when the placeholder had a
 * value and PostgreSQL kept none of it, the setting is turned off for the
 * session: whoever gave it a value could not, and the role's own setting
 * may be the one that was lost.
 *
 * Only what creates session state is refused: withdrawing a session
 * declaration (fence_use(r, NULL)), extending or releasing a lease and
 * the listing functions still work, so that clean-up code runs whatever
 * the setting.
 *
 * IDENTIFICATION
 *	  src/session_state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fencing_errcodes.h"
#include "session_state.h"
#include "utils/guc.h"

#define SESSION_STATE_GUC "fencing.allow_session_state"

static bool allow_session_state = true;

/* A value other than the default passed the permission checks. */
static bool value_accepted = false;

/*
 * Note every value PostgreSQL accepts: the values of a placeholder that
 * it keeps at load time come through here, those it drops do not.
 */
static bool
session_state_check_hook(bool *newval, void **extra, GucSource source)
{
	if (source != PGC_S_DEFAULT)
		value_accepted = true;
	return true;
}

/*
 * session_state_init
 *		Define fencing.allow_session_state; called from _PG_init().
 */
void
session_state_init(void)
{
	bool		had_placeholder = GetConfigOption(SESSION_STATE_GUC, true, false) != NULL;

	DefineCustomBoolVariable(SESSION_STATE_GUC,
							 "Allows token declarations and Redis locks that outlive a transaction.",
							 "When off, fence_use() without is_local and fenced_acquire() are refused; "
							 "the transaction forms still work.",
							 &allow_session_state,
							 true,
							 PGC_SUSET,
							 0,
							 session_state_check_hook, NULL, NULL);
	if (had_placeholder && !value_accepted)
		SetConfigOption(SESSION_STATE_GUC, "off", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * session_state_check
 *		Refuse form, a call that would create session state, when
 *		fencing.allow_session_state is off.
 */
void
session_state_check(const char *form)
{
	if (allow_session_state)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_SESSION_STATE_NOT_ALLOWED),
			 errmsg("%s is not allowed when fencing.allow_session_state is off",
					form),
			 errdetail("A token declared or a lock taken for the session outlives the transaction: a connection pool would hand it to the next client."),
			 errhint("Use the transaction forms inside the transaction that writes: fence_use(..., is_local => true) or fenced_acquire_xact().")));
}
