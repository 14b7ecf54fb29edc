/**
 * The console's integrations and audit views in headless Chromium, on both backends: a webhook whose
 * receiver refuses shows its failed delivery with each attempt's status, latency and error, and a replay from
 * the console (confirmed in the dialog) delivers it once the receiver is back, checked through the API; a
 * federation peer shows its trust expiry and the failed call to it with the error; the audit log shows an
 * admin's key revocation as it happens and narrows by actor, action and time window. Each view passes axe-core
 * and fits a phone.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { emitOk, expectError, expectOk } from '../api/support.js';
import { expectAccessible, launch, open, screenshots, signIn, WAIT, walkShot } from './console-kit.js';

/** retries give up after a second, so a refusing receiver makes a failed delivery within the test */
const FAST = {
  ALLOW_PRIVATE_NETWORK: 'true',
  WEBHOOK_BACKOFF_BASE_MS: '100',
  WEBHOOK_RETRY_WINDOW_MS: '1000',
  WEBHOOK_TIMEOUT_MS: '2000',
  FEDERATION_BACKOFF_BASE_MS: '100',
  FEDERATION_RETRY_WINDOW_MS: '1000',
  FEDERATION_TIMEOUT_MS: '2000',
};

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

describe.each(BACKENDS)('console integrations on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let page: Page;
  let hooks: Receiver;
  let peerEnd: Receiver;
  let receiverUp = false;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    hooks = await startReceiver(() => (receiverUp ? 200 : 503));
    peerEnd = await startReceiver(() => 502);
    svc = await servers.start(FAST);
    root = await bootstrap(svc.url);
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await signIn(page, svc.url, root.key);
  });

  afterAll(async () => {
    await page?.close();
    await Promise.all([hooks?.close(), peerEnd?.close()]);
  });

  it('webhooks: a failed delivery with its attempts, replayed from the console once the receiver is back', async () => {
    const hook = expectOk(await root.client.post('/admin/webhooks', { url: hooks.url, events: ['signal.emitted'], description: 'ops bridge' }), 201);
    await open(page, '#/integrations', `#webhooks article[data-id="${hook.id}"]`);
    await emitOk(root, { signal_type: 'alert', content: 'disk full on db-2' });
    const failed = await page.waitForSelector(`article[data-id="${hook.id}"] tr[data-status="failed"]`, WAIT);
    hooks.secret = hook.secret;
    const deliveryId = (await failed.getAttribute('data-delivery'))!;
    const row = `tr[data-delivery="${deliveryId}"]`;
    expect(await page.textContent(`${row} details summary`)).toMatch(/failed 503 \d+ ms/);
    expect(await page.textContent(row)).toContain('signal.emitted');
    await page.click(`${row} details summary`);
    await walkShot(page, 'incident-webhook-failed', backend);

    receiverUp = true;
    await page.click(`${row} button:text-is("Replay")`);
    await page.waitForSelector('#confirm[open]', WAIT);
    expect(await page.textContent('#confirm-message')).toContain(deliveryId);
    await page.click('#confirm-ok');
    await page.waitForSelector(`${row}[data-status="delivered"]`, WAIT);
    const page1 = expectOk(await root.client.get(`/admin/webhooks/${hook.id}/deliveries`));
    const d = page1.deliveries.find((x: any) => x.id === deliveryId);
    expect(d.status).toBe('delivered');
    expect(d.attempts.at(-1)).toMatchObject({ status: 'succeeded', response_code: 200 });
    expect(hooks.unique().size).toBe(1);
  });

  it('federation peers: trust expiry and the failed call with its error', async () => {
    const peer = expectOk(await root.client.post('/federation/trust', { name: 'acme', endpoint: peerEnd.url, allowed_scopes: ['alert'], expires_in: 7 * 86_400 }), 201);
    const peerId = peer.peer_id ?? peer.id;
    expectOk(await root.client.post('/emit', { signal_type: 'alert', content: 'page acme on-call', to_peer: peerId, to_role: 'oncall' }), 201);
    const row = `#peer-table tr[data-peer="${peerId}"]`;
    await page.waitForSelector(`${row} td:has-text("1 failed")`, WAIT);
    expect(await page.textContent(row)).toMatch(/expires .*\(in 16[78] h\)/);
    expect(await page.textContent(`${row} .peer-error`)).toMatch(/deliver/);
    // the recent calls come from GET /admin/peers/:id/calls: the same call, failed with the peer's 502
    const calls = expectOk(await root.client.get(`/admin/peers/${peerId}/calls`)).calls;
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ call: 'deliver', status: 'failed' });
    expect(calls[0].attempts.at(-1)).toMatchObject({ status: 'failed', response_code: 502 });
    expect(calls[0]).not.toHaveProperty('body');
    expect(await page.textContent(`${row} li[data-call="${calls[0].id}"]`)).toMatch(/deliver failed · 502 \d+ ms/);
    expectError(await root.client.get('/admin/peers/01JNOSUCHPEER000000000000/calls'), 404, 'DISC_PEER_NOT_FOUND');
    await expectAccessible(page);
    await screenshots(page, 'integrations', backend);
  });

  it('audit log: an admin action appears as it happens; actor, action and time filters narrow it', async () => {
    const agent = await join(root.client, 'builder-3');
    await open(page, '#/audit', '#audit-table');
    const keys = expectOk(await root.client.get('/admin/api-keys'));
    const key = keys.find((k: any) => k.owner === agent.id);
    expectOk(await root.client.post(`/admin/api-keys/${key.id}/revoke`));
    await page.waitForSelector(`#audit-table tr[data-action="api_key.revoke"]:has-text("${key.id}")`, WAIT);

    await page.fill('#audit-action', 'api_key.revoke');
    await page.click('#audit-filters button[type=submit]');
    await page.waitForFunction(() => [...document.querySelectorAll('#audit-table tbody tr')].every((r) => r.getAttribute('data-action') === 'api_key.revoke'), undefined, WAIT);
    expect(await page.$$eval('#audit-table tbody tr', (els) => els.length)).toBe(1);
    await walkShot(page, 'incident-key-revoked', backend);

    await page.fill('#audit-action', '');
    await page.selectOption('#audit-actor', { label: 'root' });
    await page.fill('#audit-until', '2020-01-01T00:00');
    await page.click('#audit-filters button[type=submit]');
    await page.waitForSelector('#audit-entries p:has-text("No entries match")', WAIT);
    await page.fill('#audit-until', '');
    await page.click('#audit-filters button[type=submit]');
    await page.waitForSelector('#audit-table', WAIT);
    expect(await page.$$eval('#audit-table tbody tr td:nth-child(2)', (els) => [...new Set(els.map((e) => e.textContent))])).toEqual(['root']);
    await expectAccessible(page);
    await screenshots(page, 'audit', backend);
    expect(pageErrors).toEqual([]);
  });
});
