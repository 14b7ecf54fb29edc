/**
 * The authorization matrix over secrets stored: the artifact share-link key, a webhook's signing secret and a
 * peer's federation secret never come out of a route. Every route of the LIVE table is called as an admin with
 * its path parameters set to the names and ids the secrets are stored under or beside; no answer is a 5xx and
 * none carries a secret. The share-link key lives outside the artifact keyspace (ids are checked before a
 * lookup), links name the key that signed them, and an admin's rotation ends every older link (audited).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Route } from '../../src/http/server.js';
import { upload, download } from '../helpers/blobs.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

const METHOD = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' } as const;
const WEBHOOK_SECRET = 'whsec_' + Buffer.from('stored-webhook-secret-bytes').toString('base64');

for (const backend of BACKENDS) {
  describe(`secrets stored, on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;
    let member: Member;
    let artifact: string;

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      member = await join(root.client, 'member');
      artifact = (await upload(svc.url, member.key, '/artifacts/upload', 'private bytes', { fields: { name: 'p.txt', visibility: 'private' }, type: 'text/plain' })).body.data.id;
    });

    const shareLink = async (by: Member = member) => new URL(expectOk(await by.client.post(`/artifacts/${artifact}/share`, {})).url);
    const fetchLink = (u: URL) => download(svc.url, undefined, u.pathname + u.search);

    it('the share-link key is no artifact: reading or deleting its old name or its key is 404, never the secret or a 500', async () => {
      await shareLink();
      for (const id of ['share-secret', 'secret:artifact-share', 'artifact-share', '..%2Fsecret:artifact-share']) {
        expectError(await root.client.get(`/artifacts/${id}?meta=true`), 404, 'ARTIFACT_NOT_FOUND');
        expectError(await root.client.del(`/artifacts/${id}`), 404, 'ARTIFACT_NOT_FOUND');
        expectError(await root.client.post(`/artifacts/${id}/share`, {}), 404, 'ARTIFACT_NOT_FOUND');
      }
    });

    it('links name their key; a rotation by an admin ends every older link on its next use, and is audited', async () => {
      const old = await shareLink();
      const kid = old.searchParams.get('kid');
      expect(kid).toBeTruthy();
      expect((await fetchLink(old)).status).toBe(200);
      // another key id on the same signature is not the key that signed it
      const forged = new URL(old);
      forged.searchParams.set('kid', 'another');
      const wrongKey = await fetchLink(forged);
      expectError({ status: wrongKey.status, body: wrongKey.json() }, 403, 'ARTIFACT_SHARE_INVALID');

      expectError(await member.client.post('/admin/artifacts/share-key/rotate', {}), 403, 'AUTH_ADMIN_REQUIRED');
      const rotated = expectOk(await root.client.post('/admin/artifacts/share-key/rotate', {}));
      expect(rotated.kid).not.toBe(kid);
      const refused = await fetchLink(old);
      expectError({ status: refused.status, body: refused.json() }, 403, 'ARTIFACT_SHARE_INVALID');
      const fresh = await shareLink();
      expect(fresh.searchParams.get('kid')).toBe(rotated.kid);
      const served = await fetchLink(fresh);
      expect(served.status).toBe(200);
      expect(served.bytes.toString()).toBe('private bytes');

      const audit = expectOk(await root.client.get('/admin/audit?action=artifact.share_key.rotate')).entries;
      expect(audit[0]).toMatchObject({ actor: root.id, action: 'artifact.share_key.rotate', details: { kid: rotated.kid, previous_kid: kid } });
      expect(JSON.stringify(audit)).not.toContain((await svc.store.get<{ secret: string }>('secret:artifact-share'))!.value.secret);
    });

    it('no route of the live table answers a stored secret or a 5xx, whatever it is called with', async () => {
      await shareLink();
      const hook = expectOk(await root.client.post('/admin/webhooks', { url: 'https://hooks.example/in', events: ['signal.emitted'], secret: WEBHOOK_SECRET }), 201);
      const trust = expectOk(await root.client.post('/federation/trust', { name: 'Peer org', endpoint: 'https://peer.example', allowed_scopes: ['pulse'] }), 201);
      const share = (await svc.store.get<{ secret: string }>('secret:artifact-share'))!.value.secret;
      const secrets = [share, WEBHOOK_SECRET, WEBHOOK_SECRET.slice(6), trust.shared_secret];
      const ids = ['share-secret', 'secret:artifact-share', 'artifact-share', 'generation', hook.id, trust.peer_id, artifact];
      // reads first, so the writes (deletes among them) cannot hide what a read would have shown
      const routes = [...svc.routes].sort((a, b) => Number(b.method === 'get') - Number(a.method === 'get'));
      const seen: string[] = [];
      for (const r of routes as Route[]) {
        const names = r.path.match(/:[A-Za-z_]+/g) ?? [];
        for (const id of names.length ? ids : ['']) {
          const path = r.path.replace(/:[A-Za-z_]+/g, encodeURIComponent(id));
          for (const q of r.method === 'get' ? ['', '?meta=true'] : ['']) {
            const res = await fetch(svc.url + path + q, {
              method: METHOD[r.method],
              headers: { authorization: `Bearer ${root.key}`, accept: 'application/json, text/event-stream', ...(r.method === 'get' || r.method === 'del' ? {} : { 'content-type': 'application/json' }) },
              body: r.method === 'get' || r.method === 'del' ? undefined : '{}',
              signal: AbortSignal.timeout(10_000),
            }).catch((e) => ({ status: 0, text: async () => String(e) }));
            const text = await res.text();
            seen.push(`${METHOD[r.method]} ${r.path}`);
            expect(res.status, `${METHOD[r.method]} ${path}${q}: ${text.slice(0, 300)}`).toBeLessThan(500);
            for (const s of secrets) expect(text.includes(s), `${METHOD[r.method]} ${path}${q} answers a stored secret`).toBe(false);
          }
        }
      }
      expect(new Set(seen).size).toBe(svc.routes.length);
    });
  });
}
