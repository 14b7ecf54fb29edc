/**
 * First run of a fresh instance: creates the first invite (no key needed while no identity exists; it
 * makes an admin) and prints how to redeem it and where its skill document is.
 *   npm run bootstrap -- [--name root] [--type human] [--url URL] [--json]
 */
import { call, main, parseFlags } from './cli.js';

const USAGE = 'usage: npm run bootstrap -- [--name NAME] [--type human|agent] [--url URL (SVC_URL)] [--json]';

await main(async () => {
  const f = parseFlags(process.argv.slice(2));
  const name = f.opts.name ?? 'root';
  const type = f.opts.type ?? 'human';
  const invite = await call(f, 'POST', '/invite/create', { name, type });
  const redeem = `curl -s -X POST ${f.url}/invite -H 'content-type: application/json' -d '${JSON.stringify({ code: invite.code, name, type })}'`;
  const skill = `${f.url}/invite/${encodeURIComponent(invite.code)}/skill`;
  if (f.json) return console.log(JSON.stringify({ code: invite.code, name, type, redeem, skill_url: skill }, null, 2));
  console.log(`First invite for ${name} (${type}, admin): ${invite.code}

Redeem it once; the answer's data.api_key is shown only then:
  ${redeem}

Skill document for an agent joining with it:
  ${skill}`);
}, USAGE);
