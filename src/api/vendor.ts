/** The console's maintained libraries, served from their installed ES module builds (no copy, no build step). */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { createRequire } from 'node:module';
import { AppError } from '../errors.js';
import type { Route } from '../http/server.js';

const JS = 'text/javascript; charset=utf-8';

/** jsdiff's libesm folder: its own modules import each other by relative path, so the tree is served as it is. */
function diffDir(): string {
  const pkg = createRequire(import.meta.url).resolve('diff/package.json');
  return join(dirname(pkg), 'libesm');
}

/** Every .js file of the folder, read once: a path outside the listing (`..` included) is NOT_FOUND. */
function jsFiles(dir: string): Map<string, string> {
  const names = existsSync(dir) ? readdirSync(dir, { recursive: true, encoding: 'utf8' }) : [];
  return new Map(names.filter((n) => n.endsWith('.js')).map((n) => [n.split(sep).join('/'), readFileSync(join(dir, n), 'utf8')]));
}

export const vendorRoutes = (): Route[] => {
  const diff = jsFiles(diffDir());
  const file = (path: string) => {
    const body = diff.get(path);
    if (body === undefined) throw new AppError('NOT_FOUND', `No vendor file diff/${path}`);
    return { text: { contentType: JS, body } };
  };
  return [
    { method: 'get', path: '/dashboard/vendor/diff/:file', auth: 'public', unlimited: true, handler: (r) => file(r.params.file) },
    { method: 'get', path: '/dashboard/vendor/diff/:dir/:file', auth: 'public', unlimited: true, handler: (r) => file(`${r.params.dir}/${r.params.file}`) },
  ];
};
