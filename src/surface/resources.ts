/**
 * Read-only resources (MCP `resources/*`): each URI is read through the same service call as its REST route
 * or its method, under the same ACL, and says which committed journal entries change it (subscriptions).
 * URIs: `svc://whoami`, `svc://inbox/{identity}?limit=&scope=`, `svc://thread/{id}`,
 * `svc://reservations?project=&identity=&path=`, `svc://tasks/mine`.
 */
import Type, { type TObject } from 'typebox';
import type { Principal } from '../identity/model.js';
import { isSignalEntry, type JournalEntry, type SignalEntry } from '../journal/journal.js';
import { ListSchema } from '../reservations/schemas.js';
import { scopesOf, type InboxScope } from '../signals/inbox.js';
import { outOfScope } from '../signals/policy.js';
import { InboxQuery } from '../signals/schemas.js';
import { commaList, compile, validateQuery } from '../validation.js';
import { invoke, resolve, type MethodTable } from './methods.js';
import { DEFAULT_LIMIT, Limit, page } from './paging.js';
import type { SurfaceServices } from './workflow.js';

/** What the watching principal's journal tail knows of an entry: its push would show it; it lands in its inbox. */
export interface Seen {
  readonly shown: boolean;
  readonly recipient: boolean;
}

/** A resource a URI names: its read, and which journal entries change what that read answered. */
export interface Located {
  read(p: Principal): Promise<unknown>;
  changedBy(p: Principal, first: unknown): (e: JournalEntry, seen: Seen) => boolean;
}

export interface ResourceInfo {
  uri: string;
  name: string;
  title: string;
  description: string;
  mimeType: 'application/json';
}
export type TemplateInfo = Omit<ResourceInfo, 'uri'> & { uriTemplate: string };

const JSON_TYPE = 'application/json' as const;

export const RESOURCES: ResourceInfo[] = [
  { uri: 'svc://whoami', name: 'whoami', title: 'Who am I', description: 'The caller: identity, key (without secret), membership, roles and rings.', mimeType: JSON_TYPE },
  { uri: 'svc://reservations', name: 'reservations', title: 'Active path reservations', description: "Active reservations of the org's project, newest first (query: project, identity, path, limit).", mimeType: JSON_TYPE },
  { uri: 'svc://tasks/mine', name: 'tasks-mine', title: 'Tasks I hold', description: 'Tasks the caller holds under a lease, each with its lease end.', mimeType: JSON_TYPE },
];

export const TEMPLATES: TemplateInfo[] = [
  { uriTemplate: 'svc://inbox/{identity}{?limit,scope}', name: 'inbox', title: 'Inbox', description: "An identity's inbox, most urgent first (the caller's own, or any for an admin); scope is a comma list of direct, role, ring, broadcast.", mimeType: JSON_TYPE },
  { uriTemplate: 'svc://thread/{id}', name: 'thread', title: 'Thread', description: 'Every signal of the thread the signal is in.', mimeType: JSON_TYPE },
];

const ReservationsQuery = compile(Type.Object({ ...ListSchema.properties, limit: Limit }, { additionalProperties: false }));
const inboxFields = (InboxQuery.schema as TObject).properties;
const InboxUriQuery = compile(Type.Object({ limit: Limit, scope: inboxFields.scope!, type: inboxFields.type! }, { additionalProperties: false }));

type Query = Record<string, string>;

export class Resources {
  constructor(
    private table: MethodTable,
    private s: SurfaceServices,
  ) {}

  /** The fixed resources and the caller's own inbox. */
  list(p: Principal): ResourceInfo[] {
    const inbox = TEMPLATES[0]!;
    return [...RESOURCES, { uri: `svc://inbox/${p.identity.id}`, name: 'my-inbox', title: 'My inbox', description: inbox.description, mimeType: JSON_TYPE }];
  }

  private call(method: string, params: unknown, p: Principal): Promise<unknown> {
    return invoke(resolve(this.table, method, params)!, p);
  }

  /** The resource a URI names, or undefined for none. */
  locate(uri: string): Located | undefined {
    let u: URL;
    let segs: string[];
    try {
      u = new URL(uri);
      // a segment that is not valid percent-encoding names nothing (decodeURIComponent throws on it)
      segs = u.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    } catch {
      return undefined;
    }
    if (u.protocol !== 'svc:') return undefined;
    const query: Query = Object.fromEntries(u.searchParams);
    const where = [u.host, ...segs].join('/');
    if (where === 'whoami' && !u.search) return this.whoami();
    if (where === 'reservations') return this.reservations(query);
    if (where === 'tasks/mine' && !u.search) return this.tasksMine();
    if (u.host === 'inbox' && segs.length === 1) return this.inbox(segs[0]!, query);
    if (u.host === 'thread' && segs.length === 1 && !u.search) return this.thread(segs[0]!);
    return undefined;
  }

  private whoami(): Located {
    return {
      read: (p) => this.call('identity.whoami', {}, p),
      // a membership, role or ring change of the caller, or its access ending
      changedBy: (p) => (e) => !isSignalEntry(e) && (e.data as { identity_id?: unknown } | null)?.identity_id === p.identity.id,
    };
  }

  private reservations(query: Query): Located {
    return {
      read: async (p) => {
        const q = validateQuery(ReservationsQuery, query);
        return page('reservations', await this.s.reservations.list(p, q, undefined, q.limit ?? DEFAULT_LIMIT));
      },
      changedBy: (p) => {
        const project = this.s.reservations.projectOf(p, query.project);
        return (e, seen) => !isSignalEntry(e) && e.type.startsWith('reservation.') && seen.shown && (e.data as { project?: string }).project === project;
      },
    };
  }

  private tasksMine(): Located {
    return {
      read: (p) => this.call('tasks.mine', {}, p),
      // a task the caller now holds, or one that has just left a lease (perhaps the caller's)
      changedBy: (p) => (e) => isSignalEntry(e) && e.signal.signal_type === 'task' && (e.signal.claimed_by === p.identity.id || e.prev_state === 'leased'),
    };
  }

  private inbox(identity: string, query: Query): Located {
    return {
      read: async (p) => {
        const q = validateQuery(InboxUriQuery, query) as { limit?: number; scope?: string; type?: string };
        return page('signals', await this.s.inbox.identityInbox(p, identity, { ...q, types: commaList(q.type) }, undefined, q.limit ?? DEFAULT_LIMIT));
      },
      changedBy: (p) => {
        const scope = commaList(query.scope) as InboxScope[] | undefined;
        const types = commaList(query.type);
        const mine = identity === p.identity.id || identity === `@${p.identity.name}`;
        return (e, seen) => {
          if (!isSignalEntry(e) || (types && !types.includes(e.signal.signal_type)) || (scope && !addressedBy(e, scope))) return false;
          // another identity's inbox (an admin's read): any signal that could reach it, conservatively
          return mine ? seen.recipient : e.signal.to_identity === null || e.signal.to_identity === identity || identity.startsWith('@');
        };
      },
    };
  }

  private thread(id: string): Located {
    return {
      read: (p) => this.call('thread.get', { signal_id: id }, p),
      changedBy: (p, first) => {
        const thread = (first as { signals: { thread_id: string }[] }).signals[0]?.thread_id ?? id;
        return (e) => isSignalEntry(e) && e.signal.thread_id === thread && !outOfScope(p.key, e.signal);
      },
    };
  }
}

const addressedBy = (e: SignalEntry, scope: InboxScope[]) =>
  scopesOf({ to_identity: e.signal.to_identity, to_role_id: e.route.role_id, to_ring_id: e.route.ring_id }).some((s) => scope.includes(s));
