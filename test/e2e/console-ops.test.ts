/**
 * The console's search, signal/task detail and agents views in headless Chromium on both backends, with
 * seeded data: each view's content (in the agents view each key's last use, or never), each admin action
 * (cancel, release a lease, retry a dead letter, resend a webhook delivery, revoke a key, suspend a
 * membership, force-release a reservation) asked for, confirmed and checked through the API and the audit
 * log, an axe-core scan of every view, keyboard navigation, and the page at 1280x800 and 390x844
 * (screenshots to docs/console/ when CONSOLE_SCREENSHOTS=1).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { waitFor } from '../helpers/wait.js';
import { upload } from '../helpers/blobs.js';
import { emitOk, expectOk } from '../api/support.js';
import { expectAccessible, launch, screenshots, WAIT } from './console-kit.js';

let browser: Browser;

beforeAll(async () => {
  browser = await launch();
});

afterAll(async () => {
  await browser?.close();
});

describe.each(BACKENDS)('console views on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let worker: Member;
  let helper: Member;
  let rx: Receiver;
  let page: Page;
  const seeded: Record<string, any> = {};
  const pageErrors: string[] = [];

  const audited = async (action: string, target: string) =>
    waitFor(`audit ${action} ${target}`, async () => expectOk(await root.client.get(`/admin/audit?action=${action}&target=${encodeURIComponent(target)}`)).entries, (e: any[]) => e.length === 1);
  const signal = async (id: string) => expectOk(await root.client.get(`/admin/actors/signal/${id}`));

  /** opens a view and confirms the dialog its button opens */
  async function confirmAction(selector: string) {
    await page.click(selector);
    await page.waitForSelector('#confirm[open]');
    await page.click('#confirm-ok');
  }

  /** the hash changes without a reload: wait for this signal's own fields, not the last view's */
  async function openSignal(id: string) {
    await page.goto(`${svc.url}/dashboard#/signal/${id}`);
    await page.waitForSelector(`[data-field=id]:text-is("${id}")`, WAIT);
  }

  async function views(name: string) {
    await expectAccessible(page);
    await screenshots(page, name, backend);
  }

  beforeAll(async () => {
    rx = await startReceiver();
    svc = await servers.start({ ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100' });
    root = await bootstrap(svc.url);
    worker = await join(root.client, 'worker-7');
    helper = await join(root.client, 'helper-3');
    expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events: ['signal.emitted'] }), 201);
    seeded.leased = await emitOk(root, { signal_type: 'task', content: 'migrate the zebra table', to_identity: worker.id });
    expectOk(await worker.client.post('/claim', { signal_id: seeded.leased.id, lease_ms: 600_000 }));
    seeded.open = await emitOk(root, { signal_type: 'task', content: 'write release notes', to_identity: worker.id });
    seeded.dead = await emitOk(root, { signal_type: 'task', content: 'flaky deploy', to_identity: worker.id, max_attempts: 1 });
    expectOk(await worker.client.post('/claim', { signal_id: seeded.dead.id, lease_ms: 60_000 }));
    expectOk(await worker.client.post('/ack', { signal_id: seeded.dead.id, outcome: 'failed' }));
    await waitFor('dead letter', () => signal(seeded.dead.id), (a: any) => a.state === 'dead_letter');
    seeded.note = await emitOk(root, { signal_type: 'note', content: 'zebra crossing at noon', to_identity: helper.id });
    seeded.memory = expectOk(await root.client.post('/memory/store', { namespace: 'org', content: 'the zebra migration runs at night' }), 201);
    seeded.artifact = expectOk(await upload(svc.url, root.key, '/artifacts/upload', 'plan', { type: 'text/plain', fields: { name: 'zebra-plan.txt' } }), 201);
    seeded.reservation = expectOk(await worker.client.post('/reservations', { project: 'web', paths: ['src/zebra.ts'], ttl_s: 600 })).granted[0];
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(`${svc.url}/dashboard`);
    await page.fill('#key', root.key);
    await page.click('#signin button[type=submit]');
    await page.waitForSelector('#live-state:has-text("live")', WAIT);
  });

  afterAll(async () => {
    await page?.close();
    await rx?.close();
  });

  it('the overview opens first, with nav links and no zero actor counts', async () => {
    await page.waitForSelector(`#feed li[data-id="${seeded.note.id}"]`, WAIT);
    expect(await page.$$eval('#nav a', (as) => as.map((a) => a.textContent))).toEqual(expect.arrayContaining(['Overview', 'Search', 'Agents']));
    await page.waitForSelector('#actors td.n', WAIT);
    expect(await page.$$eval('#actors td.n', (tds) => tds.map((t) => t.textContent))).not.toContain('0');
    await views('overview');
  });

  it('search finds signals, tasks, identities and opens a result in place; the keyboard gets there', async () => {
    await page.keyboard.press('/');
    await page.waitForSelector('#search-q:focus', WAIT);
    await page.keyboard.type('zebra');
    await page.keyboard.press('Enter');
    await page.waitForSelector(`#results-signals li[data-id="${seeded.note.id}"]`, WAIT);
    await page.waitForSelector(`#results-tasks li[data-id="${seeded.leased.id}"]`);
    expect(await page.$(`#results-tasks li[data-id="${seeded.open.id}"]`)).toBeNull();
    await page.waitForSelector(`#results-memories li[data-id="${seeded.memory.id}"]`);
    await page.waitForSelector(`#results-artifacts li[data-id="${seeded.artifact.id}"]`);
    await page.click(`#results-signals li[data-id="${seeded.note.id}"] button`);
    await page.waitForSelector('#search-detail:has-text("zebra crossing at noon")');
    await views('search');
    await page.fill('#search-q', 'helper-3');
    await page.press('#search-q', 'Enter');
    await page.waitForSelector(`#results-identities li[data-id="${helper.id}"]`, WAIT);
  });

  it('a leased task shows its timers and transitions, and an admin releases the lease', async () => {
    await openSignal(seeded.leased.id);
    await page.waitForSelector('#signal-timers [data-timer=LEASE_EXPIRED]', WAIT);
    expect(await page.textContent('#signal-history')).toContain('CLAIM');
    expect(await page.textContent('[data-field=claimed_by]')).toBe('worker-7');
    await page.waitForSelector('#signal-webhooks [data-delivery]', WAIT);
    await views('signal');
    // cancelling the dialog does nothing
    await page.click('#action-release');
    await page.waitForSelector('#confirm[open]');
    await page.keyboard.press('Escape');
    expect((await signal(seeded.leased.id)).state).toBe('leased');
    await confirmAction('#action-release');
    await waitFor('released', () => signal(seeded.leased.id), (a: any) => a.state !== 'leased');
    await audited('task.release', seeded.leased.id);
    await page.waitForSelector('#signal-status:has-text("Release: done")', WAIT);
  });

  it('resends a webhook delivery of the signal', async () => {
    const hooks = expectOk(await root.client.get('/admin/webhooks'));
    const deliveries = async () => expectOk(await root.client.get(`/admin/webhooks/${hooks[0].id}/deliveries?limit=50`)).deliveries.filter((d: any) => JSON.stringify(d.payload).includes(seeded.leased.id));
    const [d] = await waitFor('delivered', deliveries, (ds: any[]) => ds[0]?.status === 'delivered');
    await page.reload();
    await page.waitForSelector(`[data-delivery="${d.id}"] button.resend`, WAIT);
    await confirmAction(`[data-delivery="${d.id}"] button.resend`);
    await audited('webhook.replay', d.id);
  });

  it('cancels an open task and retries a dead letter', async () => {
    await openSignal(seeded.open.id);
    await confirmAction('#action-cancel');
    await waitFor('cancelled', () => signal(seeded.open.id), (a: any) => a.context.task_status === 'cancelled');
    await audited('task.cancel', seeded.open.id);
    await openSignal(seeded.dead.id);
    await confirmAction('#action-retry');
    await waitFor('retried', () => signal(seeded.dead.id), (a: any) => a.state !== 'dead_letter');
    await audited('task.retry', seeded.dead.id);
  });

  it('agents: liveness, connections, leases, reservations and keys; force-release, suspend and revoke', async () => {
    const open = expectOk(await root.client.get(`/admin/connections?identity_id=${root.id}`)).connections;
    expect(open.length).toBeGreaterThan(0);
    const unused = expectOk(await root.client.post('/admin/api-keys', { owner: worker.id }), 201).id;
    const workerKey = await waitFor('the worker key’s last use', async () => (expectOk(await root.client.get('/admin/api-keys')) as any[]).find((k) => k.owner === worker.id && k.id !== unused), (k: any) => k.last_used_at !== null);
    await page.goto(`${svc.url}/dashboard#/agents`);
    const card = (id: string) => `section.agent[data-id="${id}"]`;
    await page.waitForSelector(`${card(root.id)} [data-transport=sse]`, WAIT);
    await page.waitForSelector(`${card(worker.id)} [data-reservation="${seeded.reservation.id}"]`);
    // each key's last use beside it: the time the API answers, or never
    const shown = await page.waitForSelector(`${card(worker.id)} [data-key="${workerKey.id}"] [data-last-used="${workerKey.last_used_at}"]`, WAIT);
    expect(await shown.textContent()).toMatch(/^last used \S/);
    expect(await shown.textContent()).not.toContain('never');
    expect(await page.textContent(`${card(worker.id)} [data-key="${unused}"] [data-last-used=""]`)).toBe('last used never');
    expect(await page.textContent(`${card(worker.id)} [data-liveness]`)).toBe('active');
    await views('agents');

    await confirmAction(`${card(worker.id)} [data-reservation="${seeded.reservation.id}"] button.force-release`);
    await waitFor('force-released', async () => expectOk(await root.client.get(`/reservations/${seeded.reservation.id}`)), (r: any) => r.state === 'released');
    await audited('reservation.force_release', seeded.reservation.id);

    await confirmAction(`${card(helper.id)} button.suspend`);
    const membership = await waitFor('suspended', async () => (expectOk(await root.client.get('/org/company/memberships?limit=100')).memberships as any[]).find((m) => m.identity_id === helper.id), (m: any) => m.status === 'suspended');
    await audited('membership.status', membership.id);

    const keyId = workerKey.id;
    await page.waitForSelector(`${card(worker.id)} [data-key="${keyId}"] button.revoke`, WAIT);
    await confirmAction(`${card(worker.id)} [data-key="${keyId}"] button.revoke`);
    await waitFor('revoked', async () => (await worker.client.get('/signals/list')).status, (s) => s === 401);
    await audited('api_key.revoke', keyId);
    expect(pageErrors).toEqual([]);
  });

  it('keeps the key in session storage only', async () => {
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([root.key]);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
  });
});
