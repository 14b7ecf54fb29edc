/**
 * The console's memory, workspace and artifacts views in headless Chromium, on both backends, over data
 * seeded through the API: namespaces with counts, keyword and semantic search, a memory's relations drawn as
 * an SVG graph; the workspace tree, a file's revisions and a line diff of two of them (jsdiff from
 * /dashboard/vendor/); artifacts with a download and a share link that opens without a key. Each view follows
 * a change made through the API without a reload, passes axe-core, and fits a phone.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { upload } from '../helpers/blobs.js';
import { bootstrap, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectOk } from '../api/support.js';
import { expectAccessible, launch, open, screenshots, signIn, WAIT } from './console-kit.js';

let browser: Browser;
beforeAll(async () => {
  browser = await launch();
});
afterAll(async () => {
  await browser?.close();
});

describe.each(BACKENDS)('console browsers on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let page: Page;
  const pageErrors: string[] = [];
  const mem: Record<string, string> = {};

  const store = async (content: string) => expectOk(await root.client.post('/memory/store', { namespace: 'org', content, memory_type: 'fact' }), 201).id as string;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    mem.runbook = await store('Deploy runbook for the payments service: drain, migrate, release');
    mem.owner = await store('The payments service is owned by team blue');
    mem.rollback = await store('Rollback checklist: revert the release tag and restore the snapshot');
    expectOk(await root.client.post('/memory/relate', { from_id: mem.runbook, to_id: mem.owner, relation: 'owned_by' }), 201);
    expectOk(await root.client.post('/memory/relate', { from_id: mem.runbook, to_id: mem.rollback, relation: 'see_also' }), 201);
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await signIn(page, svc.url, root.key);
  });

  afterAll(async () => {
    await page?.close();
  });

  it('memory: namespaces with counts that follow a new memory, keyword and semantic search', async () => {
    await open(page, '#/memory', '#namespace-table');
    await page.waitForSelector('#namespace-table tr:has(button:text-is("org")) td:text-is("3")', WAIT);
    await page.waitForSelector(`#memory-recent li[data-id="${mem.rollback}"]`, WAIT);
    await store('Payments on-call rotation starts Monday');
    await page.waitForSelector('#namespace-table tr:has(button:text-is("org")) td:text-is("4")', WAIT);

    await page.fill('#mem-q', 'rollback snapshot');
    await page.selectOption('#mem-mode', 'keyword');
    await page.click('#memory-search button[type=submit]');
    await page.waitForSelector(`#memory-results li[data-id="${mem.rollback}"]`, WAIT);
    expect(await page.$$eval('#memory-results li', (els) => els.map((e) => e.getAttribute('data-id')))).not.toContain(mem.owner);

    await page.selectOption('#mem-mode', 'semantic');
    await page.fill('#mem-q', 'payments service owned by team blue');
    await page.click('#memory-search button[type=submit]');
    await page.waitForSelector(`#memory-results li[data-id="${mem.owner}"]:has-text("score")`, WAIT);
    await expectAccessible(page);
    await screenshots(page, 'memory', backend);
  });

  it('memory: one memory with its relations drawn as a graph', async () => {
    await page.click(`#memory-recent li[data-id="${mem.runbook}"] a`);
    await page.waitForSelector('svg.graph', WAIT);
    expect(await page.$$eval('svg.graph g.node', (els) => els.map((e) => e.getAttribute('data-id')).sort())).toEqual([mem.runbook, mem.owner, mem.rollback].sort());
    expect(await page.$$eval('svg.graph line.edge', (els) => els.length)).toBe(2);
    expect(await page.$$eval('svg.graph .edge-label', (els) => els.map((e) => e.textContent).sort())).toEqual(['owned_by', 'see_also']);
    expect(await page.textContent('#memory-edges')).toContain('owned_by');
    await expectAccessible(page);
    await screenshots(page, 'memory-graph', backend);
  });

  it('workspace: the tree, a file’s revisions following a new one, and a line diff of two', async () => {
    const dir = expectOk(await root.client.post('/workspace/folders', { name: 'runbooks' }), 201);
    const file = expectOk(await upload(svc.url, root.key, '/workspace/files/upload', 'drain traffic\nrun migrations\nrelease v1\n', { type: 'text/markdown', fields: { name: 'deploy.md', parent_id: dir.id } }), 201);
    expectOk(await upload(svc.url, root.key, `/workspace/files/${file.id}/content`, 'drain traffic\nrun migrations\nrelease v2\nwatch dashboards\n', { method: 'PUT', type: 'text/markdown' }));
    await open(page, '#/workspace', `#workspace-tree li[data-id="${dir.id}"]`);
    await page.click(`#workspace-tree li[data-id="${dir.id}"] > button`);
    await page.waitForSelector(`li[data-id="${file.id}"] a`, WAIT);
    // a file written now appears in the open folder: the tree redraws from the stream and keeps it open
    const more = expectOk(await upload(svc.url, root.key, '/workspace/files/upload', 'notes', { type: 'text/plain', fields: { name: 'notes.txt', parent_id: dir.id } }), 201);
    await page.waitForSelector(`#workspace-tree li[data-id="${dir.id}"] li[data-id="${more.id}"]`, WAIT);
    await page.click(`li[data-id="${file.id}"] a`);
    await page.waitForSelector('#revisions tbody tr:nth-child(2)', WAIT);
    expect(await page.$$eval('#revisions tbody tr', (els) => els.length)).toBe(2);

    await page.click('#compare');
    await page.waitForSelector('#diff .added', WAIT);
    expect(await page.$$eval('#diff .removed', (els) => els.map((e) => e.textContent))).toEqual(['- release v1']);
    expect(await page.$$eval('#diff .added', (els) => els.map((e) => e.textContent))).toEqual(['+ release v2', '+ watch dashboards']);

    expectOk(await upload(svc.url, root.key, `/workspace/files/${file.id}/content`, 'drain traffic\nrelease v3\n', { method: 'PUT', type: 'text/markdown' }));
    await page.waitForSelector('#revisions tbody tr:nth-child(3)', WAIT);
    await page.click('#compare');
    await page.waitForSelector('#diff .added:text-is("+ release v3")', WAIT);
    await expectAccessible(page);
    await screenshots(page, 'workspace', backend);
  });

  it('artifacts: the list follows an upload; download, and a share link that opens without a key', async () => {
    await open(page, '#/artifacts', '#artifact-list');
    const a = expectOk(await upload(svc.url, root.key, '/artifacts/upload', 'incident report: all green', { multipart: true, type: 'text/plain', filename: 'report.txt' }), 201);
    const row = `#artifacts tr[data-id="${a.id}"]`;
    await page.waitForSelector(row, WAIT);
    expect(await page.textContent(row)).toContain('report.txt');

    const [file] = await Promise.all([page.waitForEvent('download', WAIT), page.click(`${row} button:text-is("Download")`)]);
    expect(file.suggestedFilename()).toBe('report.txt');

    await page.click(`${row} button:text-is("Share link")`);
    const url = await (await page.waitForSelector(`#share-out a[data-artifact="${a.id}"]`, WAIT)).getAttribute('href');
    const shared = await fetch(url!);
    expect(shared.status).toBe(200);
    expect(await shared.text()).toBe('incident report: all green');
    await expectAccessible(page);
    await screenshots(page, 'artifacts', backend);
    expect(pageErrors).toEqual([]);
  });
});
