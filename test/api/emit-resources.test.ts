/**
 * The check behind `resources` and legacy `attachments` on emit (src/artifacts/resources.ts), run through
 * the service on a real server's store and blob store, on both backends and both blob stores: resources
 * must exist and be visible to the emitter; attachments become artifact resources and ask for a
 * Deprecation header. (Wiring it into POST /emit is the signal service's side.)
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { Artifacts } from '../../src/artifacts/service.js';
import { ATTACHMENTS_DEPRECATION, Resources } from '../../src/artifacts/resources.js';
import { principalForKey } from '../../src/auth/keys.js';
import { isAppError } from '../../src/errors.js';
import { Workspace } from '../../src/workspace/service.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { blobStoreOn, MATRIX, upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectOk } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(MATRIX(BACKENDS))('emit resources on %s with %s blobs', (backend, blob) => {
  const blobs = blobStoreOn(blob);
  const servers = serversOn(backend);
  let svc: Started;
  let root: Member;
  let m: Member;
  let resources: Resources;
  let art: any;
  let secret: any;
  let file: any;

  beforeAll(async () => {
    svc = await servers.start(await blobs.env());
    root = await bootstrap(svc.url);
    m = await join(root.client, 'emitter');
    const workspace = new Workspace(svc.runtime, svc.blobs, 1024);
    resources = new Resources(new Artifacts(svc.runtime, svc.blobs, 1024, () => svc.url), workspace);
    art = expectOk(await upload(svc.url, root.key, '/artifacts/upload', 'shared', { fields: { name: 'a.txt' } }), 201);
    secret = expectOk(await upload(svc.url, root.key, '/artifacts/upload', 'mine', { fields: { name: 's.txt', visibility: 'private' } }), 201);
    file = expectOk(await upload(svc.url, root.key, '/workspace/files/upload', 'doc', { fields: { name: 'doc.md' } }), 201);
  });

  const check = async (who: Member, r?: unknown[], a?: unknown[]) => resources.check(await principalForKey(svc.store, who.key, false), r, a);
  const refused = async (who: Member, r?: unknown[], a?: unknown[]) => {
    const e = await check(who, r, a).then(() => undefined, (x) => x);
    expect(isAppError(e), String(e)).toBe(true);
    return { code: e.code, status: e.status, field: e.details?.field };
  };

  it('resources of every kind that exist pass through, de-duplicated, with no extra header', async () => {
    const out = await check(m, [
      { kind: 'artifact', id: art.id },
      { kind: 'workspace_item', id: file.id },
      { kind: 'workspace_revision', id: file.current_revision_id },
      { kind: 'artifact', id: art.id },
    ]);
    expect(out).toEqual({
      resources: [
        { kind: 'artifact', id: art.id },
        { kind: 'workspace_item', id: file.id },
        { kind: 'workspace_revision', id: file.current_revision_id },
      ],
      headers: {},
    });
    expect(await check(m)).toEqual({ resources: [], headers: {} });
  });

  it('attachments (bare ids and {artifact_id}) become artifact resources and ask for a Deprecation header', async () => {
    const out = await check(m, [{ kind: 'workspace_item', id: file.id }], [art.id, { artifact_id: art.id }]);
    expect(out.resources).toEqual([{ kind: 'workspace_item', id: file.id }, { kind: 'artifact', id: art.id }]);
    expect(out.headers).toEqual(ATTACHMENTS_DEPRECATION);
    expect(out.headers.deprecation).toMatch(/^@\d+$/);
    expect((await check(m, undefined, [])).headers).toEqual(ATTACHMENTS_DEPRECATION);
  });

  it('a missing resource is its kind\'s NOT_FOUND naming the entry', async () => {
    expect(await refused(m, [{ kind: 'artifact', id: art.id }, { kind: 'artifact', id: UNKNOWN }])).toEqual({ code: 'ARTIFACT_NOT_FOUND', status: 404, field: 'resources[1]' });
    expect(await refused(m, [{ kind: 'workspace_item', id: UNKNOWN }])).toEqual({ code: 'WORKSPACE_ITEM_NOT_FOUND', status: 404, field: 'resources[0]' });
    expect(await refused(m, [{ kind: 'workspace_revision', id: UNKNOWN }])).toEqual({ code: 'WORKSPACE_REVISION_NOT_FOUND', status: 404, field: 'resources[0]' });
    expect(await refused(m, [], [UNKNOWN])).toEqual({ code: 'ARTIFACT_NOT_FOUND', status: 404, field: 'attachments[0]' });
  });

  it('what the emitter may not see is refused as missing: another member\'s private artifact, a deleted file and its revisions', async () => {
    expect(await refused(m, [{ kind: 'artifact', id: secret.id }])).toMatchObject({ code: 'ARTIFACT_NOT_FOUND' });
    expect(await refused(m, [], [{ artifact_id: secret.id }])).toMatchObject({ code: 'ARTIFACT_NOT_FOUND', field: 'attachments[0]' });
    expect((await check(root, [{ kind: 'artifact', id: secret.id }])).resources).toEqual([{ kind: 'artifact', id: secret.id }]);
    const gone = expectOk(await upload(svc.url, m.key, '/workspace/files/upload', 'tmp', { fields: { name: 'gone.md' } }), 201);
    expectOk(await m.client.del(`/workspace/items/${gone.id}`));
    expect(await refused(m, [{ kind: 'workspace_item', id: gone.id }])).toMatchObject({ code: 'WORKSPACE_ITEM_NOT_FOUND' });
    expect(await refused(m, [{ kind: 'workspace_revision', id: gone.current_revision_id }])).toMatchObject({ code: 'WORKSPACE_REVISION_NOT_FOUND' });
  });

  it('malformed entries are SIGNAL_EMIT_VALIDATION_FAILED naming the entry', async () => {
    const bad = { code: 'SIGNAL_EMIT_VALIDATION_FAILED', status: 400 };
    expect(await refused(m, [{ kind: 'signal', id: 'x' }])).toEqual({ ...bad, field: 'resources[0]' });
    expect(await refused(m, [{ kind: 'artifact' }])).toEqual({ ...bad, field: 'resources[0]' });
    expect(await refused(m, ['just-an-id'])).toEqual({ ...bad, field: 'resources[0]' });
    expect(await refused(m, [], [{ id: art.id }])).toEqual({ ...bad, field: 'attachments[0]' });
    expect(await refused(m, [], [42])).toEqual({ ...bad, field: 'attachments[0]' });
  });
});
