/**
 * What the browser-view console tests share: one Debian Chromium per file, signing in through the page, an
 * axe-core scan (no serious or critical violation), and the docs screenshots at 1280x800 and 390x844,
 * written under docs/console/ only with CONSOLE_SCREENSHOTS=1 (so CI leaves the committed PNGs alone).
 */
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const SHOTS = resolve(import.meta.dirname, '../../docs/console');
/** a bound against a hang while the page shows a push or an answer, never a latency claim */
export const WAIT = { timeout: 10_000 };

export const launch = (): Promise<Browser> =>
  chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });

/** Signs in through the form and waits for the shell's stream to be live. */
export async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/dashboard`);
  await page.fill('#key', key);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#live-state:has-text("live")', WAIT);
}

/** Opens a view by its hash and waits for the shell to have drawn it. */
export async function open(page: Page, hash: string, ready: string): Promise<void> {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForSelector(ready, WAIT);
}

/** axe-core over the whole page as it is now: serious and critical violations fail, named by rule and node. */
export async function expectAccessible(page: Page): Promise<void> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const r = await (window as any).axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v: any) => v.impact === 'serious' || v.impact === 'critical').map((v: any) => `${v.id}: ${v.nodes.map((n: any) => n.target.join(' ')).join(', ')}`);
  });
  expect(violations).toEqual([]);
}

/** The view at desktop and phone sizes: never wider than the phone; PNGs only when asked for, from the embedded run. */
export async function screenshots(page: Page, view: string, backend: string): Promise<void> {
  const write = process.env.CONSOLE_SCREENSHOTS === '1' && backend === 'embedded';
  if (write) await mkdir(SHOTS, { recursive: true });
  await page.setViewportSize({ width: 1280, height: 800 });
  if (write) await page.screenshot({ path: `${SHOTS}/${view}-desktop.png` });
  await page.setViewportSize({ width: 390, height: 844 });
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  if (write) await page.screenshot({ path: `${SHOTS}/${view}-phone.png` });
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** One desktop screenshot for the operators' walk-through (docs/operators.md), under the same rule. */
export async function walkShot(page: Page, name: string, backend: string): Promise<void> {
  if (process.env.CONSOLE_SCREENSHOTS !== '1' || backend !== 'embedded') return;
  await mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${name}.png` });
}
