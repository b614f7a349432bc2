/*-------------------------------------------------------------------------
 *
 * declared.c
 *	  Tokens that a session or transaction declared for a resource, and
 *	  fencing.allow_session_state: whether this session may declare tokens
 *	  and take locks that outlive a transaction.
 *
 * A client that holds the lock on a resource declares its token once, with
 * fence_use() or through fenced_acquire(), and then writes without
 * threading the token through every statement: fence_guard() stamps the
 * declared token into rows that do not carry one.
 *
 * Session declarations last until replaced or cleared.  Transaction-local
 * ones, for pooled connections where session state would leak to the next
 * client, vanish at commit or abort and take precedence meanwhile.
 * Neither is undone by ROLLBACK TO SAVEPOINT: a declaration mirrors a lock
 * held in the lock service, which a rollback does not release either.
 * DISCARD ALL, a pooler's reset between clients, clears both kinds; a
 * transaction with transaction-local declarations cannot be prepared,
 * since they would not follow it to COMMIT PREPARED.
 * A declaration grants nothing by itself; every write is still checked
 * against the resource's high-water mark.
 *
 * Session state.  A session declaration (fence_use without is_local) and
 * a session lease (fenced_acquire) belong to the server connection.  A
 * pool that hands the connection to another client hands them over too:
 * the next borrower's tokenless writes are stamped with the first one's
 * token, and its fenced_release() gives back the first one's lock.  The transaction
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
 *	  src/guard/declared.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "core/core.h"
#include "fencing_errcodes.h"
#include "funcapi.h"
#include "guard/guard.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

typedef struct DeclaredEntry
{
	ResourceMapKey key;
	FenceToken	token;
} DeclaredEntry;

static ResourceMap *session_tokens = NULL;
static ResourceMap *local_tokens = NULL;
static MemoryContext local_tokens_cxt = NULL;

/*
 * Counts every change of the declarations, so that fence_guard can tell
 * that what it looked up for the last row still holds (declared_generation).
 */
static uint64 declared_changes = 0;

/*
 * declared_generation
 *		A number that changes whenever a declaration may have changed.
 */
uint64
declared_generation(void)
{
	return declared_changes;
}

PG_FUNCTION_INFO_V1(fence_use);
PG_FUNCTION_INFO_V1(fence_declared);

/*
 * declared_at_xact_end
 *		Forget transaction-local declarations; called when a transaction
 *		ends, whichever way.
 */
void
declared_at_xact_end(void)
{
	declared_changes++;
	if (local_tokens != NULL)
	{
		local_tokens = NULL;
		MemoryContextReset(local_tokens_cxt);
	}
}

/*
 * declared_pre_prepare
 *		Refuse to PREPARE a transaction that has transaction-local
 *		declarations: they end with the transaction, which PREPARE hands to
 *		whoever commits it later, perhaps another session.
 */
void
declared_pre_prepare(void)
{
	if (local_tokens != NULL && resource_map_count(local_tokens) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot PREPARE a transaction that has declared transaction-local tokens"),
				 errdetail("Tokens declared with fence_use(..., is_local => true) or by fenced_acquire_xact() end with the transaction, not with COMMIT PREPARED."),
				 errhint("Withdraw them with fence_use(resource, NULL, is_local => true) first.")));
}

/*
 * declared_discard_all
 *		Forget every declaration of the session, for DISCARD ALL.
 */
void
declared_discard_all(void)
{
	declared_at_xact_end();
	declared_changes++;
	if (session_tokens != NULL)
	{
		/* the map lives in a context of its own */
		MemoryContextDelete(resource_map_context(session_tokens));
		session_tokens = NULL;
	}
}

static ResourceMap *
declared_map(bool is_local)
{
	if (is_local)
	{
		if (local_tokens == NULL)
		{
			if (local_tokens_cxt == NULL)
				local_tokens_cxt = AllocSetContextCreate(TopMemoryContext,
														 "fencing local tokens",
														 ALLOCSET_SMALL_SIZES);
			local_tokens = resource_map_create("fencing local tokens",
											   sizeof(DeclaredEntry),
											   local_tokens_cxt);
		}
		return local_tokens;
	}
	if (session_tokens == NULL)
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext,
												  "fencing session tokens",
												  ALLOCSET_SMALL_SIZES);

		session_tokens = resource_map_create("fencing session tokens",
											 sizeof(DeclaredEntry), cxt);
	}
	return session_tokens;
}

/*
 * declared_lookup
 *		The token declared for resource, transaction-local first; false if
 *		there is none.
 */
bool
declared_lookup(const char *resource, FenceToken *token)
{
	DeclaredEntry *entry = NULL;

	if (local_tokens != NULL)
		entry = resource_map_lookup(local_tokens, resource);
	if (entry == NULL && session_tokens != NULL)
		entry = resource_map_lookup(session_tokens, resource);
	if (entry == NULL)
		return false;
	*token = entry->token;
	return true;
}

/*
 * declared_get
 *		The token declared for resource in one scope; false if there is
 *		none.
 */
bool
declared_get(const char *resource, bool is_local, FenceToken *token)
{
	ResourceMap *map = is_local ? local_tokens : session_tokens;
	DeclaredEntry *entry = NULL;

	if (map != NULL)
		entry = resource_map_lookup(map, resource);
	if (entry == NULL)
		return false;
	*token = entry->token;
	return true;
}

/*
 * declared_set
 *		Declare token for resource, for the session or the transaction.
 */
void
declared_set(const char *resource, FenceToken token, bool is_local)
{
	DeclaredEntry *entry;
	bool		found;

	declared_changes++;
	entry = resource_map_enter(declared_map(is_local), resource, &found);
	entry->token = token;
}

/*
 * declared_clear
 *		Withdraw the declaration for resource in one scope.
 */
void
declared_clear(const char *resource, bool is_local)
{
	ResourceMap *map = is_local ? local_tokens : session_tokens;

	declared_changes++;
	if (map != NULL)
		resource_map_remove(map, resource);
}

/*
 * declared_use
 *		What fence_use() does with its arguments: declare token (none:
 *		withdraw the declaration) for resource, for the session or with
 *		is_local the transaction.  Also called by the lock layer's
 *		fence_use() with a lease (lease_use.c).
 */
void
declared_use(const char *resource, bool has_token, FenceToken token,
			 bool is_local)
{
	resource_name_check(resource, strlen(resource));
	if (!is_local && has_token)
		session_state_check("fence_use() without is_local");

	/*
	 * A transaction-local declaration made by a statement of its own would
	 * end with that statement and fence nothing; refuse it rather than let
	 * the caller believe its next statement carries the token.  Several
	 * statements sent as one query string form an implicit transaction
	 * block and may declare for the statements after.
	 */
	if (is_local && !IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("fence_use with is_local can only be used in transaction blocks"),
				 errhint("Call it after BEGIN, in the transaction that writes, or in the same query string as the write.")));

	if (!has_token)
		declared_clear(resource, is_local);
	else
		declared_set(resource, token, is_local);
}

/*
 * declared_use_args
 *		The arguments of fence_use(): resource and is_local, refused if
 *		null; the token, if not null.
 */
char *
declared_use_args(FunctionCallInfo fcinfo, bool *has_token, FenceToken *token,
				  bool *is_local)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource must not be null")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("is_local must not be null")));
	*has_token = !PG_ARGISNULL(1);
	*token = *has_token ? PG_GETARG_FENCE_TOKEN(1) : 0;
	*is_local = PG_GETARG_BOOL(2);
	return text_to_cstring(PG_GETARG_TEXT_PP(0));
}

/*
 * fence_use(resource text, token fence_token, is_local boolean)
 *		Declare the token this session, or with is_local this transaction
 *		only, writes resource with.  A NULL token withdraws the
 *		declaration.  (1.3's fence_use, with a lease, is lease_use.c's.)
 */
Datum
fence_use(PG_FUNCTION_ARGS)
{
	bool		has_token;
	FenceToken	token;
	bool		is_local;
	char	   *resource = declared_use_args(fcinfo, &has_token, &token,
											 &is_local);

	declared_use(resource, has_token, token, is_local);
	PG_RETURN_VOID();
}

/* Add one row per entry of map to the result set. */
static void
declared_emit(ReturnSetInfo *rsinfo, ResourceMap *map, bool is_local)
{
	ResourceMapIterator iter;
	DeclaredEntry *entry;

	if (map == NULL)
		return;
	resource_map_iterate(map, &iter);
	while ((entry = resource_map_next(&iter)) != NULL)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(entry->key.resource);
		values[1] = FenceTokenGetDatum(entry->token);
		values[2] = BoolGetDatum(is_local);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * fence_declared()
 *		The tokens declared in this session: resource, token, is_local.
 */
Datum
fence_declared(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	declared_emit(rsinfo, local_tokens, true);
	declared_emit(rsinfo, session_tokens, false);
	return (Datum) 0;
}


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
