/** Small shared assertions for API and e2e tests: a success status, emit, the error envelope, and bounded polling for an eventual state. */
import { expect } from 'vitest';
import type { Client, Member, Res } from '../helpers/client.js';

export const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** Asserts the status (the body is the message when it differs) and returns the envelope's `data`. */
export function expectOk(res: Res, status = 200): any {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  return res.body.data;
}

/** POST /emit as a member or with a client: expects 201 and returns the signal. */
export async function emitOk(by: Member | Client, body: Record<string, unknown>): Promise<any> {
  const client = 'client' in by ? by.client : by;
  return expectOk(await client.post('/emit', body), 201);
}

/** Asserts the one error envelope: status, code, a request id, a message, details, and a docs_url naming the code. */
export function expectError(res: Res, status: number, code: string, field?: string): void {
  expect({ status: res.status, code: res.body?.error?.code }, JSON.stringify(res.body)).toEqual({ status, code });
  const e = res.body.error;
  expect(Object.keys(res.body)).toEqual(['error']);
  expect(e.request_id).toMatch(/^req_/);
  expect(typeof e.message).toBe('string');
  expect(e.message.length).toBeGreaterThan(0);
  expect(e).toHaveProperty('details');
  expect(e.docs_url).toMatch(new RegExp(`/docs/errors/${code}$`));
  if (field !== undefined) expect(e.details?.field).toBe(field);
}

export { waitFor } from '../helpers/wait.js';

/** Every signal the client can list, newest first, walking all pages. */
export async function listAll(client: Client, limit = 100): Promise<any[]> {
  const out: any[] = [];
  let after: string | null = null;
  for (let page = 0; page < 1000; page++) {
    const r: Res = await client.get(`/signals/list?limit=${limit}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    out.push(...r.body.data.signals);
    if (!r.body.data.has_more) return out;
    after = r.body.data.cursor;
  }
  throw new Error('signal list did not end within 1000 pages');
}

/** Every signal of a thread in thread order, walking GET /thread/:id's pages to the end. */
export async function threadAll(client: Client, id: string): Promise<any[]> {
  const out: any[] = [];
  let after: string | null = null;
  for (let page = 0; page < 1000; page++) {
    const r: Res = await client.get(`/thread/${id}?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    out.push(...r.body.data.signals);
    if (!r.body.data.has_more) return out;
    after = r.body.data.cursor;
  }
  throw new Error('thread did not end within 1000 pages');
}

/** One signal as GET /signals/list shows it (walks pages until found). */
export async function findSignal(client: Client, id: string): Promise<any | undefined> {
  return (await listAll(client)).find((s) => s.id === id);
}

/** Sets an identity's membership status through the real admin route (finding its membership by paging the list). */
export async function setMembershipStatus(admin: Client, identityId: string, status: 'active' | 'suspended' | 'removed'): Promise<void> {
  let after: string | null = null;
  for (let page = 0; page < 1000; page++) {
    const r: Res = await admin.get(`/org/company/memberships?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const m = r.body.data.memberships.find((x: any) => x.identity_id === identityId);
    if (m) {
      expectOk(await admin.patch(`/org/company/memberships/${m.id}/status`, { status }));
      return;
    }
    if (!r.body.data.has_more) break;
    after = r.body.data.cursor;
  }
  throw new Error(`no membership for identity ${identityId}`);
}
