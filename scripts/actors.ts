/**
 * Operator tool: inspect persisted actors and the push journal on the configured backend (same env as the
 * service; LMDB allows a reader beside the running service).
 *   npm run actors -- <kind> <id>      one actor's record: state value, context, version
 *   npm run actors -- journal [n]      the last n journal entries (default 20)
 */
import { readConfig } from '../src/config.js';
import { actorKey } from '../src/runtime/runtime.js';
import { JOURNAL_LOG } from '../src/journal/journal.js';
import { openStore } from '../src/store/index.js';

const [cmd, arg] = process.argv.slice(2);
if (!cmd) {
  console.error('usage: npm run actors -- <kind> <id> | journal [n]');
  process.exit(2);
}
const store = await openStore(readConfig());
try {
  if (cmd === 'journal') {
    const n = Number(arg ?? 20);
    const last = await store.lastSeq(JOURNAL_LOG);
    for (const e of await store.readLog(JOURNAL_LOG, Math.max(0, last - n), n)) console.log(JSON.stringify(e));
  } else {
    if (!arg) throw new Error('an actor id is required');
    const rec = await store.get(actorKey(cmd, arg));
    if (!rec) {
      console.error(`no ${cmd} actor ${arg}`);
      process.exitCode = 1;
    } else console.log(JSON.stringify({ kind: cmd, id: arg, version: rec.version, ...(rec.value as object) }, null, 2));
  }
} finally {
  await store.close();
}
