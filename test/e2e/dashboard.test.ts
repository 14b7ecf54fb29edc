/**
 * The console's overview in headless Chromium (Debian `chromium` driven by playwright-core), on both backends:
 * sign in with an API key (kept in session storage), the feed opens on signals sent before, an emitted
 * signal appears in the live feed as it is pushed over the console's one SSE connection, the type filter narrows the feed, a claimed task shows its claimant and a running lease
 * countdown, signal content is shown as text, and the page fits 1280x800 and a phone width. Screenshots
 * land in test-output/.
 */
import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectOk } from '../api/support.js';
import { launch, WAIT } from './console-kit.js';

const OUT = resolve(import.meta.dirname, '../../test-output');
let browser: Browser;

beforeAll(async () => {
  await mkdir(OUT, { recursive: true });
  browser = await launch();
});

afterAll(async () => {
  await browser?.close();
});

describe.each(BACKENDS)('dashboard on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let worker: Member;
  let page: Page;
  let before: { id: string };
  const pageErrors: string[] = [];
  const streams: string[] = [];

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    worker = await join(root.client, 'worker-7');
    expectOk(await root.client.post('/roles', { name: 'reviewers' }), 201);
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('request', (r) => { if (r.url().includes('/signals/stream')) streams.push(r.url()); });
    before = await emitOk(root, { signal_type: 'pulse', content: 'sent before the console opened' });
  });

  afterAll(async () => {
    await page?.close();
  });

  it('refuses a wrong key and signs in with a good one, keeping it in session storage only', async () => {
    await page.goto(`${svc.url}/dashboard`);
    await page.fill('#key', 'svc_not-a-key');
    await page.click('#signin button[type=submit]');
    await page.waitForSelector('#signin-error:has-text("AUTH_KEY_INVALID")');
    await page.fill('#key', root.key);
    await page.click('#signin button[type=submit]');
    await page.waitForSelector('#feed-state:has-text("live")');
    expect(await page.isVisible('#view')).toBe(true);
    expect(await page.isVisible('#signin')).toBe(false);
    expect(await page.textContent('#whoami')).toBe('admin');
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([root.key]);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
  });

  it('opens the feed on the recent past', async () => {
    await page.waitForSelector(`#feed li[data-id="${before.id}"]:has-text("sent before the console opened")`, WAIT);
  });

  it('shows an emitted signal in the live feed as it is pushed, as text', async () => {
    const content = '<img src=x onerror="window.hacked=1"> deploy done';
    const s = await emitOk(root, { signal_type: 'pulse', content });
    const row = await page.waitForSelector(`#feed li[data-id="${s.id}"]`, WAIT);
    expect(await row.$eval('.content', (e) => e.textContent)).toBe(content);
    expect(await page.$$('#feed img')).toHaveLength(0);
    expect(await page.evaluate(() => (window as any).hacked)).toBeUndefined();
  });

  it('narrows the feed by type', async () => {
    await page.fill('#filter-type', 'alert');
    await page.click('#filter-apply');
    await page.waitForSelector('#feed-state:has-text("live")');
    const pulse = await emitOk(root, { signal_type: 'pulse', content: 'filtered out' });
    const alert = await emitOk(root, { signal_type: 'alert', content: 'filtered in' });
    await page.waitForSelector(`#feed li[data-id="${alert.id}"]`, WAIT);
    expect(await page.$(`#feed li[data-id="${pulse.id}"]`)).toBeNull();
    await page.fill('#filter-type', '');
    await page.click('#filter-apply');
  });

  it('shows a claimed task with its claimant and a lease countdown that runs', async () => {
    const task = await emitOk(root, { signal_type: 'task', content: 'review PR 12', to_identity: worker.id });
    expectOk(await worker.client.post('/claim', { signal_id: task.id, lease_ms: 90_000 }));
    const sel = `#tasks li[data-id="${task.id}"]`;
    await page.waitForSelector(`${sel} .countdown`, WAIT);
    expect(await page.textContent(sel)).toContain('claimed by worker-7');
    const first = (await page.textContent(`${sel} .countdown`))!;
    expect(first).toMatch(/^1:(2\d|30)$/);
    await page.waitForFunction(([s, t]) => document.querySelector(s)?.textContent !== t, [`${sel} .countdown`, first] as const, WAIT);
    expect(await page.textContent(`${sel} .countdown`)).toMatch(/^1:[0-2]\d$/);
  });

  it('keeps following tasks on the one shared stream while the feed filters', async () => {
    await page.fill('#filter-type', 'pulse');
    await page.click('#filter-apply');
    const task = await emitOk(root, { signal_type: 'task', content: 'triage issue 7', to_identity: worker.id });
    expectOk(await worker.client.post('/claim', { signal_id: task.id, lease_ms: 60_000 }));
    await page.waitForSelector(`#tasks li[data-id="${task.id}"] .countdown`, WAIT);
    expect(await page.$(`#feed li[data-id="${task.id}"]`)).toBeNull();
    expect(streams).toHaveLength(1);
    // completed, so the actor counts below see the one task still leased
    expectOk(await worker.client.post('/ack', { signal_id: task.id }));
    await page.fill('#filter-type', '');
    await page.click('#filter-apply');
  });

  it('shows a role inbox, agent liveness and health charts', async () => {
    // the actor table drawn last may come from a poll before the ack above (two tasks leased between the
    // claim and the ack): the count is read from the first poll that starts after it
    const polled = page.waitForRequest((r) => r.url().endsWith('/admin/actors?limit=1'), WAIT);
    await emitOk(root, { signal_type: 'question', content: 'who reviews?', to_role: 'reviewers' });
    await page.selectOption('#inbox-target', { label: 'role reviewers' });
    await page.click('#inbox-load');
    await page.waitForSelector('#inbox li:has-text("who reviews?")');
    await page.waitForSelector(`#agents li[data-id="${worker.id}"]:has-text("active")`);
    // the counts come from /stats/overview on the page's 2 s beat
    await page.waitForSelector('[data-liveness=active] b:text-is("1")', WAIT);
    await page.waitForSelector('#charts .chart[data-series=leased] polyline');
    expect(await page.textContent('#health-state')).toBe('ok');
    // actor counts by kind and state, from GET /admin/actors: the fresh poll's answer, then the table drawn from it
    const fresh = await (await polled).response();
    expect((await fresh!.json()).data.counts.signal.leased).toBe(1);
    await page.waitForSelector('#actors tr:has(td:text-is("signal")):has(td:text-is("leased")) td.n:text-is("1")', WAIT);
    // only kinds and states holding actors are listed
    expect(await page.$$eval('#actors td.n', (tds) => tds.map((t) => t.textContent))).not.toContain('0');
    await page.screenshot({ path: `${OUT}/dashboard-${backend}-1280x800.png` });
  });

  it('fits a phone width without sideways scrolling', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    const boxes = await page.$$eval('.panel', (els) => els.map((e) => e.getBoundingClientRect().width));
    for (const w of boxes) expect(w).toBeLessThanOrEqual(390);
    await page.screenshot({ path: `${OUT}/dashboard-${backend}-phone.png`, fullPage: true });
    expect(pageErrors).toEqual([]);
  });
});
