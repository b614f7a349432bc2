// A stalled lock holder behind node-postgres's Pool, for
// test/scripts/pool_takeover.sh: what the application sees when a newer
// holder takes its lock over (TF110), whether the process survives, and
// whether the pool then hands out a working client.
//
//   node pool_victim.js ACCT STALL      (PGHOST, PGPORT, ... from the environment)
//
// A Pool of one client.  The holder checks it out, BEGINs, takes acct:ACCT
// with fenced_acquire_xact(..., ttl => '1 s'), writes a ledger line,
// prints "ready" and stalls 4 s: STALL "idle" in the client (idle in
// transaction), "sleep" in SELECT pg_sleep(4).  Then it writes a second
// line and commits, releases the client, checks one out again and runs
// SELECT 1.  Prints:
//
//   ready
//   event <error's code or -> <message>      (the checked-out client's 'error' event, if any)
//   error <error class> <code or -> <message> (the failed query's)
//   next <1, or the error>
//   alive
//
// With NO_LINE=1 in the environment, without doc/clients.md's lines (no
// 'error' listener on the checked-out client, release() without the
// error), to show what node-postgres does by default.
const { Pool } = require('pg');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const withLine = process.env.NO_LINE !== '1';
const line = (err) => String(err.message).split('\n')[0];

async function main() {
  const [acct, stall] = process.argv.slice(2);
  const pool = new Pool({ max: 1 });
  // the lines: an idle client's error is the pool's 'error' event, and a
  // checked-out client's its own: without a listener either one ends the
  // process (an uncaught 'error' event)
  pool.on('error', (err) => console.log('pool-event', err.code || '-', line(err)));
  const client = await pool.connect();
  let failed = null;
  const onError = (err) => {
    console.log('event', err.code || '-', line(err));
    failed = failed || err;
  };
  if (withLine) client.on('error', onError);
  try {
    await client.query('BEGIN');
    await client.query("SELECT fenced_acquire_xact($1, ttl => '1 s')", [`acct:${acct}`]);
    await client.query('INSERT INTO ledger (acct, amount) VALUES ($1, 1)', [acct]);
    console.log('ready');
    if (stall === 'idle') await sleep(4000);
    else await client.query('SELECT pg_sleep(4)');
    await client.query('INSERT INTO ledger (acct, amount) VALUES ($1, 2)', [acct]);
    await client.query('COMMIT');
    console.log('error -');
  } catch (err) {
    console.log('error', err.constructor.name, err.code || '-', line(err));
    failed = failed || err;
  }
  client.removeListener('error', onError);
  // the line: release(err) destroys the client instead of pooling it
  client.release(withLine ? failed || undefined : undefined);
  try {
    const again = await pool.connect();
    const r = await again.query('SELECT 1 AS one');
    console.log('next', r.rows[0].one);
    again.release();
  } catch (err) {
    console.log('next', err.constructor.name, line(err));
  }
  await pool.end();
  console.log('alive');
}

main().catch((err) => { console.log('crashed', line(err)); process.exit(1); });
