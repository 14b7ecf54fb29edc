import Type from 'typebox';
import { SHARE_MAX_S } from '../artifacts/service.js';
import type { Route } from '../http/server.js';
import { readUpload } from '../http/upload.js';
import type { Principal } from '../identity/model.js';
import { compile, Key } from '../validation.js';
import { contentReply, uploadFields } from './content.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const invalid = 'ARTIFACT_VALIDATION_FAILED' as const;
const NonEmpty = Type.String({ minLength: 1 });
const ListQuery = compile(
  Type.Object({
    tag: Type.Optional(Key('tag')),
    content_type: Type.Optional(NonEmpty),
    uploaded_by: Type.Optional(Key('foreign_id')),
    since: Type.Optional(Type.String({ format: 'date-time' })),
    after: After,
    limit: Limit,
  }),
);
const GetQuery = compile(Type.Object({ meta: Type.Optional(Type.Boolean()) }));
const ShareBody = compile(Type.Object({ expires_in: Type.Optional(Type.Integer({ minimum: 1, maximum: SHARE_MAX_S })) }));
const SharedQuery = compile(Type.Object({ expires: Type.Optional(Type.String()), kid: Type.Optional(Type.String()), sig: Type.Optional(Type.String()) }));

export const artifactRoutes = ({ artifacts }: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/artifacts/upload',
    auth: 'key',
    stream: true,
    idempotent: true,
    handler: async (r) => {
      const u = await readUpload(r, invalid);
      const f = uploadFields(u.fields, invalid);
      return { status: 201, data: await artifacts.upload(r.principal, { ...f, name: f.name ?? u.filename ?? '' }, u.file, u.content_type) };
    },
  },
  {
    method: 'get',
    path: '/artifacts/list',
    auth: 'key',
    query: ListQuery,
    handler: async (r) => {
      const q = r.query;
      return pageReply('artifacts', await artifacts.list(r.principal, { ...q, since: q.since ? Date.parse(q.since) : undefined }, decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT));
    },
  },
  {
    method: 'get',
    path: '/artifacts/:id',
    auth: 'key',
    query: GetQuery,
    handler: async (r) => (r.query.meta ? { data: await artifacts.get(r.principal, r.params.id) } : contentReply(await artifacts.content(r.principal, r.params.id, r.headers), 'attachment')),
  },
  { method: 'del', path: '/artifacts/:id', auth: 'key', handler: async (r) => ({ data: await artifacts.remove(r.principal, r.params.id) }) },
  { method: 'post', path: '/artifacts/:id/share', auth: 'key', body: ShareBody, invalid, handler: async (r) => ({ data: await artifacts.share(r.principal, r.params.id, r.body.expires_in ?? 3600) }) },
  {
    method: 'get',
    path: '/artifacts/:id/shared',
    auth: 'public',
    unlimited: true,
    query: SharedQuery,
    handler: async (r) => contentReply(await artifacts.shared(r.params.id, r.query.expires, r.query.kid, r.query.sig, r.headers), 'attachment'),
  },
  { method: 'post', path: '/admin/artifacts/share-key/rotate', auth: 'admin', handler: async (r) => ({ data: await artifacts.rotateShareKey(r.principal) }) },
];
