/**
 * The glob-against-glob overlap rule (docs/reservations.md): a literal path against a glob is exact
 * (picomatch, dotfiles included); two globs are disjoint only when their literal prefixes or suffixes
 * rule out a common path; anything else is a possible overlap. Every "disjoint" answer is also checked
 * against sample paths: no sample may match both globs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { boundedGlob, exactMatcher, globMatcher, literalPrefix, literalSuffix, mayOverlap, normalizePath } from '../../src/reservations/overlap.js';

const cases: [string, string, boolean][] = [
  // literals
  ['src/a.ts', 'src/a.ts', true],
  ['src/a.ts', 'src/b.ts', false],
  ['src', 'src/a.ts', false],
  // ** in all positions
  ['**', 'anything/at/all.md', true],
  ['**', 'src/*.ts', true],
  ['src/**', 'src', true],
  ['src/**', 'src/deep/er/x.ts', true],
  ['src/**', 'lib/**', false],
  ['src/**', 'srcx/a.ts', false],
  ['**/a.ts', 'a.ts', true],
  ['**/a.ts', 'x/y/a.ts', true],
  ['**/a.ts', '**/b.ts', false],
  ['src/**/*.ts', 'src/**/*.js', false],
  ['src/**/*.ts', 'src/x/**', true],
  ['src/**/*.ts', 'docs/*.ts', false],
  ['src/**', 'src/.env', true],
  // single star does not cross a slash
  ['src/*.ts', 'src/a/b.ts', false],
  ['src/*.ts', 'src/a.ts', true],
  // character classes
  ['src/[ab].ts', 'src/a.ts', true],
  ['src/[ab].ts', 'src/c.ts', false],
  ['src/[!ab].ts', 'src/a.ts', false],
  ['src/[!ab].ts', 'src/c.ts', true],
  ['src/[^ab].ts', 'src/a.ts', false],
  ['src/[ab].ts', 'src/[bc].ts', true],
  ['src/[ab].ts', 'src/*.js', false],
  // brace sets
  ['src/{a,b}/**', 'src/c/x.ts', false],
  ['src/{a,b}/**', 'src/b/x.ts', true],
  ['src/{a,b}/**', 'src/*/x.ts', true],
  ['src/{api,ui}/**', 'src/db/**', false],
  ['src/*/a.ts', 'src/*/b/a.ts', false],
  ['src/*/a.ts', 'src/**/a.ts', true],
  ['src/{a/b,c}/x', 'src/a/*/x', true],
  ['{src,lib}/*.ts', 'lib/a.ts', true],
  ['{src,lib}/*.ts', 'docs/a.ts', false],
  ['src/*.{ts,js}', 'src/*.md', true],
  ['src/*.{ts,js}', 'src/a.md', false],
  // question mark
  ['src/?.ts', 'src/ab.ts', false],
  ['src/?.ts', 'src/a.ts', true],
  // `**` inside a segment or a brace set: picomatch's `**.ts` matches in every directory
  ['**.ts', 'src/*.ts', true],
  ['**.ts', 'src/app.ts', true],
  ['**.ts', 'src/app.js', false],
  ['{**,a}', 'x/*', true],
  ['{a,**}', 'a/a*', true],
];

describe('mayOverlap', () => {
  it.each(cases)('%s vs %s -> %s', (a, b, want) => {
    expect(mayOverlap(a, b)).toBe(want);
    expect(mayOverlap(b, a)).toBe(want);
  });

  it('literal prefix and suffix stop at glob characters and drop the joining slash', () => {
    expect(literalPrefix('src/**/x.ts')).toBe('src');
    expect(literalPrefix('src/a*.ts')).toBe('src/a');
    expect(literalPrefix('{a,b}/x')).toBe('');
    expect(literalSuffix('src/**/x.ts')).toBe('x.ts');
    expect(literalSuffix('src/*.ts')).toBe('.ts');
    expect(literalSuffix('src/**')).toBe('');
  });

  it('normalises ./, backslashes, doubled and trailing slashes', () => {
    expect(normalizePath('./src//a\\b.ts/')).toBe('src/a/b.ts');
  });

  it('never calls two globs disjoint when a sample path matches both (property)', () => {
    const seg = fc.constantFrom('a', 'b', 'ab', 'src', 'lib', 'x.ts', 'y.js', '.env', 'b.ts', 'a.ts');
    // every form the matcher accepts in a segment: `**` alone and inside a segment, braces holding `/` or `**`, classes, extglobs
    const globSeg = fc.constantFrom('a', 'b', 'src', 'lib', '*', '**', '*.ts', '*.js', '[ab]', '[!a]', '{a,src}', '{a/b,lib}', '{**,a}', '{a,**}', '?', 'x.ts', '**.ts', 'a**', '**b', 'a*', '*b', '@(a|b)', '!(a)', '+(a|b)', '*.{ts,js}', '.*');
    const glob = fc.array(globSeg, { minLength: 1, maxLength: 4 }).map((s) => s.join('/'));
    const path = fc.array(seg, { minLength: 1, maxLength: 4 }).map((s) => s.join('/'));
    fc.assert(
      fc.property(glob, glob, fc.array(path, { minLength: 1, maxLength: 30 }), (a, b, paths) => {
        if (mayOverlap(a, b)) return true;
        // the oracle is picomatch itself: these paths are short, so even an unbounded glob's regex is quick
        const ma = exactMatcher(a);
        const mb = exactMatcher(b);
        return !paths.some((p) => ma(p) && mb(p));
      }),
      { numRuns: 20_000 },
    );
  });
});

describe('globs whose regex would not be bounded', () => {
  const long = 'a'.repeat(1000);

  it('more than two runs of `*`, or an extglob group, are never run as a regex', () => {
    expect(['src/*.ts', '**/*.ts', '*a*b', 'src/**', '*.{ts,js}', '[!a]*'].map(boundedGlob)).toEqual([true, true, true, true, true, true]);
    expect(['*a*a*b', 'src/**/*/*.ts', '@(a|b)', '+(a|aa)b'].map(boundedGlob)).toEqual([false, false, false, false]);
  });

  it('may match every path, the conservative answer, and never decides one by its regex', () => {
    // picomatch's regex for this glob takes minutes on a 1,000-character path: the answer comes without it
    const hostile = '*a'.repeat(9) + 'b';
    expect(exactMatcher(hostile)('a'.repeat(9) + 'b')).toBe(true);
    expect(globMatcher(hostile)(long)).toBe(true);
    expect(mayOverlap(hostile, long)).toBe(true);
    expect(mayOverlap(long, '+(a|aa)b')).toBe(true);
    // a bounded glob still decides a long path exactly
    expect(mayOverlap('*a*b', long)).toBe(false);
    expect(mayOverlap('src/**/*b', `src/${long}`)).toBe(false);
  });

  it('keep the prefix and suffix rules: an unbounded glob is still disjoint from one outside its prefix', () => {
    expect(mayOverlap('src/*a*a*a*.ts', 'docs/**')).toBe(false);
    expect(mayOverlap('src/*a*a*a*.ts', 'src/**/*.js')).toBe(false);
    expect(mayOverlap('src/*a*a*a*.ts', 'src/x.ts')).toBe(true);
  });
});
