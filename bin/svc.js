#!/usr/bin/env node
// `svc`: the agent's command-line client (docs/agents.md). Its sources are TypeScript under src/cli; a
// checkout needs no build step. The first run bundles them with esbuild (tsx's own compiler) into a file
// in the temp folder named by the sources' hash, so a hook run after every tool call starts from plain
// JavaScript; without esbuild it falls back to loading the sources through tsx.
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src', 'cli');
// the files outside src/cli the bundle takes in: the cached bundle's name must change when they do
const shared = [join(root, 'actors', 'signal-wake.ts')];

async function load() {
  try {
    const hash = createHash('sha256');
    for (const f of [...readdirSync(src).sort().map((f) => join(src, f)), ...shared]) hash.update(f.slice(root.length)).update(readFileSync(f));
    // a folder only this user can write: nobody else can plant the file this process will run
    const dir = join(tmpdir(), `svc-cli-${userInfo().uid}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    if (!st.isDirectory() || st.uid !== userInfo().uid || (st.mode & 0o022) !== 0) throw new Error(`${dir} is not this user's own`);
    const out = join(dir, `${hash.digest('hex').slice(0, 16)}.mjs`);
    if (!existsSync(out)) {
      const { buildSync } = await import('esbuild');
      const tmp = `${out}.${process.pid}.tmp`;
      buildSync({
        entryPoints: [join(src, 'main.ts')],
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        outfile: tmp,
        logLevel: 'silent',
        // ws's optional native helpers stay optional; its CommonJS requires of Node's modules need a require
        external: ['bufferutil', 'utf-8-validate'],
        banner: { js: "import { createRequire as __svcRequire } from 'node:module'; const require = __svcRequire(import.meta.url);" },
      });
      renameSync(tmp, out);
    }
    return await import(pathToFileURL(out).href);
  } catch {
    const { register } = await import('tsx/esm/api');
    register();
    return import('../src/cli/main.ts');
  }
}

const { main } = await load();
const code = await main(process.argv.slice(2));
// exit once stdout is flushed: an idle keep-alive socket must not hold a hook past its answer
process.stdout.write('', () => process.exit(code));
