import Type from 'typebox';
import type { Route } from '../http/server.js';
import { readUpload } from '../http/upload.js';
import type { Principal } from '../identity/model.js';
import { compile, Key } from '../validation.js';
import { contentReply, ifMatch, uploadFields } from './content.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const invalid = 'WORKSPACE_VALIDATION_FAILED' as const;
const Id = Type.String({ minLength: 1 });
const Name = Key('name');
const Tags = Type.Array(Key('tag'), { maxItems: 100 });
const Metadata = Type.Record(Type.String(), Type.Unknown());
const FolderBody = compile(Type.Object({ name: Name, parent_id: Type.Optional(Type.Union([Id, Type.Null()])), tags: Type.Optional(Tags), metadata: Type.Optional(Metadata) }));
const PatchBody = compile(Type.Object({ tags: Type.Optional(Tags), metadata: Type.Optional(Metadata) }));
const MoveBody = compile(Type.Object({ parent_id: Type.Optional(Type.Union([Id, Type.Null()])), name: Type.Optional(Name) }));
const ListQuery = compile(Type.Object({ parent_id: Type.Optional(Id), kind: Type.Optional(Type.Union([Type.Literal('folder'), Type.Literal('file')])), after: After, limit: Limit }));
const PageQuery = compile(Type.Object({ after: After, limit: Limit }));

export const workspaceRoutes = ({ workspace }: Services): Route<Principal>[] => [
  { method: 'post', path: '/workspace/folders', auth: 'key', idempotent: true, body: FolderBody, invalid, handler: async (r) => ({ status: 201, data: await workspace.createFolder(r.principal, r.body) }) },
  {
    method: 'get',
    path: '/workspace/items',
    auth: 'key',
    query: ListQuery,
    handler: async (r) => pageReply('items', await workspace.list(r.principal, r.query, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'get', path: '/workspace/items/:id', auth: 'key', handler: async (r) => ({ data: await workspace.item(r.principal, r.params.id) }) },
  { method: 'patch', path: '/workspace/items/:id', auth: 'key', body: PatchBody, invalid, handler: async (r) => ({ data: await workspace.update(r.principal, r.params.id, r.body) }) },
  {
    method: 'del',
    path: '/workspace/items/:id',
    auth: 'key',
    handler: async (r) => {
      const d = await workspace.remove(r.principal, r.params.id);
      // still running: 202, and where to follow it
      return d.status === 'completed' ? { data: d } : { status: 202, data: d, headers: { location: `/workspace/deletions/${d.id}` } };
    },
  },
  { method: 'get', path: '/workspace/deletions/:id', auth: 'key', handler: async (r) => ({ data: await workspace.deletion(r.principal, r.params.id) }) },
  { method: 'post', path: '/workspace/items/:id/move', auth: 'key', body: MoveBody, invalid, handler: async (r) => ({ data: await workspace.move(r.principal, r.params.id, r.body) }) },
  {
    method: 'get',
    path: '/workspace/items/:id/history',
    auth: 'key',
    query: PageQuery,
    handler: async (r) => pageReply('revisions', await workspace.history(r.principal, r.params.id, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  {
    method: 'post',
    path: '/workspace/files/upload',
    auth: 'key',
    stream: true,
    idempotent: true,
    handler: async (r) => {
      const u = await readUpload(r, invalid);
      const f = uploadFields(u.fields, invalid);
      const name = f.name ?? u.filename;
      return { status: 201, data: await workspace.upload(r.principal, { ...f, name: name ?? '' }, u.file, u.content_type) };
    },
  },
  {
    method: 'put',
    path: '/workspace/files/:id/content',
    auth: 'key',
    stream: true,
    handler: async (r) => {
      const u = await readUpload(r, invalid);
      return { data: await workspace.write(r.principal, r.params.id, ifMatch(r.headers['if-match']), u.file, r.headers['content-type'] ? u.content_type : undefined) };
    },
  },
  { method: 'get', path: '/workspace/files/:id/content', auth: 'key', handler: async (r) => contentReply(await workspace.content(r.principal, r.params.id, r.headers)) },
  { method: 'get', path: '/workspace/revisions/:id/content', auth: 'key', handler: async (r) => contentReply(await workspace.revisionContent(r.principal, r.params.id, r.headers)) },
];
