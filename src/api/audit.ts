import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../validation.js';
import type { Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const Filter = Type.Optional(Type.String({ minLength: 1, maxLength: 200 }));
const AuditQuery = compile(Type.Object({ after: After, limit: Limit, actor: Filter, action: Filter, target: Filter, since: Type.Optional(Type.String({ format: 'date-time' })), until: Type.Optional(Type.String({ format: 'date-time' })) }));

export const auditRoutes = ({ audit }: Services): Route<Principal>[] => [
  {
    method: 'get',
    path: '/admin/audit',
    auth: 'admin',
    query: AuditQuery,
    handler: async (r) => {
      const { after, limit, ...filter } = r.query;
      return pageReply('entries', await audit.list(filter, decodeCursor(after), limit ?? DEFAULT_LIMIT));
    },
  },
];
