/**
 * Events other than signals on the push journal: each is recorded in the commit of its change and pushed over
 * WebSocket and SSE only to those its audience names (here: artifacts, private or org-wide; workspace files;
 * workstreams), filtered by the stream's type filter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { upload } from '../helpers/blobs.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket, SseStream, waitFor } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectOk } from './support.js';

for (const backend of BACKENDS) {
  describe(`journal events on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Service;
    let root: Member;
    let a: Member;
    let b: Member;
    const sockets: PushSocket[] = [];
    const streams: SseStream[] = [];

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      a = await join(root.client, 'ev-a');
      b = await join(root.client, 'ev-b');
    });
    afterAll(async () => {
      for (const s of streams) s.close();
      await Promise.all(sockets.map((s) => s.close()));
    });

    const open = async (m: Member) => {
      const s = await PushSocket.open(svc.url, m.key, { label: m.name });
      sockets.push(s);
      return s;
    };
    const framesOf = (s: PushSocket, type: string) => s.frames.filter((f) => f.type === type) as any[];
    const artifact = async (m: Member, name: string, visibility?: string) =>
      expectOk(await upload(svc.url, m.key, '/artifacts/upload', `bytes of ${name}`, { fields: { name, ...(visibility ? { visibility } : {}) }, type: 'text/plain' }), 201);

    it('an org artifact reaches every member; a private one only its uploader; an admin stream sees both', async () => {
      const [sa, sb] = await Promise.all([open(a), open(b)]);
      const admin = await SseStream.open(svc.url, { token: root.key, type: 'artifact.uploaded' }, 'admin', ['artifact.uploaded']);
      streams.push(admin);
      const shared = await artifact(a, 'shared.txt');
      const secret = await artifact(a, 'secret.txt', 'private');
      await waitFor(() => framesOf(sa, 'artifact.uploaded').length === 2, 5000, 'both uploads pushed to their uploader');
      await waitFor(() => framesOf(sb, 'artifact.uploaded').length >= 1, 5000, 'the org upload pushed to another member');
      await waitFor(() => admin.events.length === 2, 5000, 'both uploads on the admin stream');
      expect(framesOf(sa, 'artifact.uploaded').map((f) => f.artifact.id)).toEqual([shared.id, secret.id]);
      expect(framesOf(sa, 'artifact.uploaded')[0].cursor).toMatch(/^\d+$/);
      expect(admin.events.map((e) => e.signal.id)).toEqual([shared.id, secret.id]);
      // the private upload committed after the shared one: once b's socket passed it, it would have had it
      await b.client.post('/emit', { signal_type: 'pulse', content: 'after', to_identity: b.id });
      await waitFor(() => sb.signalIds().length === 1, 5000, 'a later signal reaches b');
      expect(framesOf(sb, 'artifact.uploaded').map((f) => f.artifact.id)).toEqual([shared.id]);
    });

    it('a workspace file update and a workstream change reach members; a type filter keeps only what it names', async () => {
      const sb = await open(b);
      const files = await SseStream.open(svc.url, { token: b.key, type: 'workspace.file_updated' }, 'files', ['workspace.file_updated', 'workstream.updated', 'signal']);
      streams.push(files);
      const file = expectOk(await upload(svc.url, a.key, '/workspace/files/upload', 'v1', { fields: { name: 'notes.md' }, type: 'text/markdown' }), 201);
      const ws = expectOk(await a.client.post('/workstreams', { name: 'launch' }), 201);
      expectOk(await a.client.patch(`/workstreams/${ws.id}`, { status: 'paused' }));
      await a.client.post('/emit', { signal_type: 'pulse', content: 'noise' });
      await waitFor(() => framesOf(sb, 'workstream.updated').length === 1 && framesOf(sb, 'workspace.file_updated').length === 1, 5000, 'file and workstream events on the socket');
      expect(framesOf(sb, 'workspace.file_updated')[0].workspace_item).toMatchObject({ id: file.id, name: 'notes.md' });
      expect(framesOf(sb, 'workstream.updated')[0].workstream).toMatchObject({ id: ws.id, status: 'paused' });
      await waitFor(() => files.events.length >= 1, 5000, 'the filtered stream gets the file event');
      await waitFor(() => sb.signalIds().length >= 1, 5000, 'the broadcast reached the socket, so the stream has passed it too');
      expect(files.events.map((e) => e.type)).toEqual(['workspace.file_updated']);
    });
  });
}
