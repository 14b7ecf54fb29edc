/**
 * Who is shown a journal entry. A new signal goes to the identities it lands on (direct, broadcast, the
 * roles they fill and the rings they belong to, narrowed by target_capabilities); an update also goes to
 * its sender and claimer. Admin SSE streams see everything but memory events of namespaces the ACL does not
 * let them read. Key scopes and the connection's own filters narrow all of it.
 */
import { elapsed } from '../clock.js';
import type { Principal } from '../identity/model.js';
import { namesInclude } from '../org/model.js';
import type { Org } from '../org/service.js';
import { Inbox } from '../signals/inbox.js';
import { ACCESS_ENDED, inAudience, isInternal, isSignalEntry, type JournalEntry, type SignalEntry } from '../journal/journal.js';
import { outOfScope } from '../signals/policy.js';
import { Lru } from '../lru.js';

/**
 * a backstop only: every change of an identity's roles or rings journals `reach.changed`, and the push reloads
 * that identity's reach before offering anything committed after it (`ReachCache.refresh`)
 */
const REACH_TTL_MS = 60_000;
/**
 * pushes a connection remembers having been sent live, to skip the `delivered` marks they cause; past it the
 * oldest is forgotten (its mark, if it still comes, is sent: the frame every subscriber got before)
 */
export const LIVE_PUSHES_MAX = 256;
/** identities whose reach is cached per process; past it the least recently asked-for is dropped */
export const REACH_MAX = 10_000;

export interface Filters {
  rings?: string[];
  types?: string[];
}

interface Reach {
  roles: string[];
  rings: string[];
  at: number;
  loading?: Promise<void>;
}

/** Roles and rings per identity: reloaded when the journal says they changed, and in the background once a minute while someone asks. */
export class ReachCache {
  private cache: Lru<string, Reach>;
  constructor(
    private org: Org,
    max = REACH_MAX,
  ) {
    this.cache = new Lru(max);
  }

  get size(): number {
    return this.cache.size;
  }

  async load(identityId: string): Promise<void> {
    const places = await this.org.placesOf(identityId);
    this.cache.set(identityId, { ...places, at: elapsed() });
  }

  /** The journal says these identities' roles or rings changed: the cached ones are read again now. */
  async refresh(identityIds: string[]): Promise<void> {
    await Promise.all(identityIds.filter((id) => this.cache.has(id)).map((id) => this.load(id).catch(() => this.cache.delete(id))));
  }

  get(identityId: string): { roles: string[]; rings: string[] } {
    const c = this.cache.get(identityId);
    if (!c) {
      void this.load(identityId).catch(() => undefined);
      return { roles: [], rings: [] };
    }
    if (elapsed() - c.at > REACH_TTL_MS && !c.loading) {
      c.loading = this.load(identityId).catch(() => {
        c.loading = undefined;
      });
    }
    return c;
  }
}

export class Audience {
  /** journal sequence → signal id of the pushes this connection was sent live as a recipient, oldest first */
  private livePushes: Map<number, string> | undefined;

  constructor(
    /** the credential's rights as last checked (`Credential` refreshes them on every auth change) */
    public principal: Principal,
    private reach: ReachCache,
    /** whether this transport shows an admin everything (SSE, MCP); a socket never does */
    private adminSeesAll: boolean,
    public filters: Filters = {},
  ) {}

  /** read per entry from the current rights: a demotion narrows at once */
  private get seesAll(): boolean {
    return this.adminSeesAll && this.principal.identity.is_admin;
  }

  /** The identity whose entries this audience is shown; undefined when it sees everything. */
  get identityId(): string | undefined {
    return this.seesAll ? undefined : this.principal.identity.id;
  }

  /** A new signal that lands in this identity's inbox (push marks it delivered). */
  isRecipient(e: JournalEntry): boolean {
    if (!isSignalEntry(e)) return false;
    const s = e.signal;
    return Inbox.reaches(
      { to_identity: s.to_identity, to_role_id: e.route.role_id, to_ring_id: e.route.ring_id, target_capabilities: s.target_capabilities, to_peer: s.to_peer },
      this.principal.identity,
      this.reach.get(this.principal.identity.id),
    );
  }

  /** This connection was sent the push at `seq` live (not in a replay): the `delivered` mark it causes is not shown here. */
  sentLive(seq: number, signalId: string): void {
    const m = (this.livePushes ??= new Map());
    m.set(seq, signalId);
    if (m.size > LIVE_PUSHES_MAX) m.delete(m.keys().next().value!);
  }

  /** A `delivered` mark of a push this connection was sent live: it has the signal and reads the state it needs. */
  private hasMark(e: SignalEntry): boolean {
    return e.pushed_at !== undefined && this.livePushes?.get(e.pushed_at) === e.signal.id;
  }

  wants(e: JournalEntry): boolean {
    const f = this.filters;
    if (!isSignalEntry(e)) {
      // a ring filter asks for that ring's signals; a type filter names event types as well as signal types
      if (isInternal(e) || f.rings?.length || (f.types?.length && !f.types.includes(e.type))) return false;
      // the end of another identity's access is an admin's to see; its own connections are ended by the re-check
      if (e.type === ACCESS_ENDED) return this.seesAll;
      // a memory event follows the namespace ACL, which gives admins nothing more (as GET /memory/:id)
      if (e.memory_namespace === undefined && this.seesAll) return true;
      return inAudience(e, this.principal, this.reach.get(this.principal.identity.id));
    }
    const s = e.signal;
    if (this.hasMark(e)) return false;
    if (f.types?.length && !f.types.includes(s.signal_type)) return false;
    if (f.rings?.length && !namesInclude(f.rings, s.to_ring)) return false;
    if (outOfScope(this.principal.key, s)) return false;
    if (this.seesAll || this.isRecipient(e)) return true;
    const me = this.principal.identity.id;
    return e.type === 'signal.updated' && (s.from_identity === me || s.claimed_by === me);
  }
}
