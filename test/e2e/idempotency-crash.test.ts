/**
 * An Idempotency-Key's claim belongs to a live attempt. On both backends the service is SIGKILLed while requests
 * with the header run, and restarted on the same data: (1) an upload killed while its body streams (its claim
 * committed, nothing else): the retry runs it once the dead attempt's lease lapsed (not a day of 409s), one
 * artifact exists and a further retry replays it; (2) emits killed in a burst: every key, answered or in flight
 * at the kill, retried with the same body answers 201, and each key made exactly one signal.
 */
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { upload } from '../helpers/blobs.js';
import { bootstrap, Client } from '../helpers/client.js';
import { BACKENDS, childServersOn } from '../helpers/server.js';
import { listAll, waitFor } from '../api/support.js';

const LEASE = { IDEMPOTENCY_LEASE_MS: '1000' };

for (const backend of BACKENDS) {
  describe(`Idempotency-Key across a SIGKILL on ${backend}`, () => {
    const fleet = childServersOn(backend, 'SIGKILL');

    it('an upload killed mid-body: the retry runs it after the lease lapses, once', async () => {
      const env = await fleet.env(LEASE);
      const first = await fleet.start(env);
      const root = await bootstrap(first.url);
      const bytes = Buffer.alloc(32 * 1024 * 1024, 7);
      const path = '/artifacts/upload?name=crash-upload';
      const req = request(first.url + path, { method: 'POST', headers: { authorization: `Bearer ${root.key}`, 'content-type': 'application/octet-stream', 'content-length': bytes.length, 'idempotency-key': 'up-1' } });
      req.on('error', () => undefined);
      // half the body, more than the socket buffers hold: it drains only once the handler reads it, i.e. holds the key
      expect(req.write(bytes.subarray(0, bytes.length / 2))).toBe(false);
      await new Promise((resolve) => req.once('drain', resolve));
      await fleet.kill(first);

      const second = await fleet.start(env);
      const again = await upload(second.url, root.key, path, bytes, { type: 'application/octet-stream', headers: { 'idempotency-key': 'up-1' } });
      expect(again.status, JSON.stringify(again.body)).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      const replay = await upload(second.url, root.key, path, bytes, { type: 'application/octet-stream', headers: { 'idempotency-key': 'up-1' } });
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.body.data.id).toBe(again.body.data.id);
      const listed = (await new Client(second.url, root.key).get('/artifacts/list?limit=100')).body.data.artifacts.filter((a: any) => a.name === 'crash-upload');
      expect(listed.map((a: any) => a.id)).toEqual([again.body.data.id]);
    });

    it('emits killed in a burst: every key retried answers 201, one signal per key', async () => {
      const env = await fleet.env(LEASE);
      const first = await fleet.start(env);
      const root = await bootstrap(first.url);
      const emit = (url: string, key: string) =>
        fetch(url + '/emit', { method: 'POST', headers: { authorization: `Bearer ${root.key}`, 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify({ signal_type: 'pulse', content: `crash ${key}` }) });
      const answered = new Map<string, string>();
      const sent: string[] = [];
      let stop = false;
      const loop = async (n: number) => {
        for (let i = 0; !stop; i++) {
          const key = `e-${n}-${i}`;
          sent.push(key);
          try {
            const r = await emit(first.url, key);
            if (r.status === 201) answered.set(key, ((await r.json()) as any).data.id);
          } catch {
            return; // the connection died with the process: this key's request has no answer
          }
        }
      };
      const loops = Array.from({ length: 8 }, (_, n) => loop(n));
      await waitFor('emits under way', () => answered.size, (n) => n >= 40, 30_000);
      await fleet.kill(first);
      stop = true;
      await Promise.all(loops);

      const second = await fleet.start(env);
      const retried = new Map<string, string>();
      for (const key of sent) {
        const r = await emit(second.url, key);
        const body = (await r.json()) as any;
        expect(r.status, `${key}: ${JSON.stringify(body)}`).toBe(201);
        retried.set(key, body.data.id);
      }
      // an answered key replays its signal; every key, answered or cut off, made exactly one
      for (const [key, id] of answered) expect(retried.get(key)).toBe(id);
      const signals = (await listAll(new Client(second.url, root.key))).filter((s) => s.content.startsWith('crash '));
      const perKey = new Map<string, string[]>();
      for (const s of signals) perKey.set(s.content, [...(perKey.get(s.content) ?? []), s.id]);
      expect([...perKey.entries()].filter(([, ids]) => ids.length !== 1)).toEqual([]);
      expect(signals.map((s) => s.id).sort()).toEqual([...new Set(retried.values())].sort());
    });
  });
}
