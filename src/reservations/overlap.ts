/**
 * Whether two path globs could match one path (docs/reservations.md, "The conflict rule"). Conservative:
 * `true` means "possibly", `false` means "provably never". A literal path against a glob is decided exactly by
 * picomatch; two globs are disjoint only when their literal prefixes (up to the first glob character) or
 * their literal suffixes (after the last one) cannot both hold for one string.
 */
import picomatch from 'picomatch';

/** characters that start or end glob syntax; a backslash escape counts, to stay conservative */
const GLOB_CHARS = /[*?[\]{}()!+@\\]/;
/** dotfiles match too: a reservation of `src/**` covers `src/.env` */
const OPTS = { dot: true };

/**
 * Unbounded wildcards (runs of `*`, a `**` among them) a glob may hold for its regex to be run: picomatch's
 * regex backtracks over every way the wildcards split a path, so with three the match of a 1 KiB path takes
 * seconds and grows with each one more (`*a*a*b` against 300 `a`s: 91 ms; nine `*a` against 40: 17 s), on the
 * thread that serves every request. With two it stays near a millisecond.
 */
const MAX_STAR_RUNS = 2;

/** Whether a glob's regex is safe to run: at most MAX_STAR_RUNS runs of `*` and no extglob group (nested quantifiers). */
export const boundedGlob = (glob: string): boolean => !glob.includes('(') && (glob.match(/\*+/g)?.length ?? 0) <= MAX_STAR_RUNS;

/** picomatch's matcher with dotfiles, a POSIX `[!ab]` read as `[^ab]`: exact, and unbounded in time for some globs */
export function exactMatcher(glob: string): (p: string) => boolean {
  // POSIX writes a negated class `[!ab]`; picomatch reads that `!` as an extglob, so it gets the `[^ab]` spelling
  return picomatch(glob.replace(/\[!/g, '[^'), OPTS);
}

const anyPath = () => true;
const cache = new Map<string, (p: string) => boolean>();
/**
 * The matcher reservations use for a glob: exact where its regex is bounded (`boundedGlob`), and otherwise
 * "may match" for every path, the conservative answer the conflict rule allows.
 */
export function globMatcher(glob: string): (p: string) => boolean {
  let m = cache.get(glob);
  if (!m) {
    if (cache.size > 10_000) cache.clear();
    m = boundedGlob(glob) ? exactMatcher(glob) : anyPath;
    cache.set(glob, m);
  }
  return m;
}

export const isGlob = (p: string) => GLOB_CHARS.test(p);

/** A path as reservations store it: forward slashes, no leading `./`, no trailing `/`. */
export const normalizePath = (p: string) => p.trim().replace(/\\/g, '/').replace(/^(\.\/)+/, '').replace(/\/+$/, '').replace(/\/{2,}/g, '/');

/** The literal text before the first glob character, without a trailing `/` (`src/**` also matches `src`). */
export function literalPrefix(glob: string): string {
  const i = glob.search(GLOB_CHARS);
  const head = i < 0 ? glob : glob.slice(0, i);
  return head.replace(/\/$/, '');
}

/** The literal text after the last glob character, without a leading `/` (`**\/a.ts` also matches `a.ts`). */
export function literalSuffix(glob: string): string {
  let last = -1;
  for (let i = 0; i < glob.length; i++) if (GLOB_CHARS.test(glob[i]!)) last = i;
  return glob.slice(last + 1).replace(/^\//, '');
}

const compatible = (a: string, b: string, f: (x: string, y: string) => boolean) => f(a, b) || f(b, a);

export function mayOverlap(a: string, b: string): boolean {
  if (a === b) return true;
  const ga = isGlob(a);
  const gb = isGlob(b);
  if (!ga && !gb) return false;
  if (!ga) return globMatcher(b)(a);
  if (!gb) return globMatcher(a)(b);
  if (!compatible(literalPrefix(a), literalPrefix(b), (x, y) => x.startsWith(y))) return false;
  if (!compatible(literalSuffix(a), literalSuffix(b), (x, y) => x.endsWith(y))) return false;
  return segmentsMayMeet(a, b);
}

/**
 * Segments cannot be aligned when one may stand for several: a brace set holding a `/` or a `**`, an extglob, or a
 * `**` inside a segment (picomatch reads a pattern `**.ts` as crossing directories): no segment reasoning then.
 */
const SPLITS_SEGMENTS = /\{[^}]*(\/|\*\*)|\(|\*\*[^/]|[^/]\*\*/;

/**
 * Segments line up from the start up to the first `**` (and from the end back to the last one): two aligned
 * segments that provably match no common name make the globs disjoint; with no `**` at all the counts must agree.
 */
function segmentsMayMeet(a: string, b: string): boolean {
  if (SPLITS_SEGMENTS.test(a) || SPLITS_SEGMENTS.test(b)) return true;
  const sa = a.split('/');
  const sb = b.split('/');
  if (!sa.includes('**') && !sb.includes('**') && sa.length !== sb.length) return false;
  const apart = (x: string[], y: string[]) => {
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] === '**' || y[i] === '**') return false;
      if (!segmentMayMeet(x[i]!, y[i]!)) return true;
    }
    return false;
  };
  return !apart(sa, sb) && !apart([...sa].reverse(), [...sb].reverse());
}

function segmentMayMeet(x: string, y: string): boolean {
  const gx = isGlob(x);
  const gy = isGlob(y);
  if (!gx && !gy) return x === y;
  if (!gx) return globMatcher(y)(x);
  if (!gy) return globMatcher(x)(y);
  return true;
}
