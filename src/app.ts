/** Builds the whole service from a config: store, actor runtime, services, front end. */
import { Artifacts } from './artifacts/service.js';
import { Resources } from './artifacts/resources.js';
import { openBlobs } from './blob/index.js';
import type { BlobStore } from './blob/port.js';
import type { Config } from './config.js';
import { routes } from './api/index.js';
import { Audit, auditOps } from './audit/audit.js';
import { authenticate } from './auth/keys.js';
import { assertUnrestricted } from './auth/standing.js';
import { authGenerationRule } from './auth/generation.js';
import { reachChangeRule } from './org/reach.js';
import { withCommitRules } from './store/commit-rules.js';
import { indexOpenTasksOnce } from './signals/open-tasks.js';
import { rateHeaders, RateLimits } from './auth/rate-limit.js';
import { Siwe } from './auth/siwe.js';
import { Inbound } from './federation/inbound.js';
import { PeerLimiter } from './federation/limits.js';
import { Nonces } from './federation/nonces.js';
import { Trust } from './federation/trust.js';
import { Health, VERSION } from './health/health.js';
import { Links } from './http/links.js';
import { Origins } from './http/origin.js';
import { openEmbedder } from './embedding/provider.js';
import { Acl } from './memory/acl.js';
import { Graph } from './memory/graph.js';
import { memoryJobKind } from './memory/job-kind.js';
import { Jobs } from './memory/jobs.js';
import { MemoryStats } from './memory/stats.js';
import { Memories } from './memory/service.js';
import { indexSharesOnce, Shares } from './memory/shares.js';
import { memoryKeys, type NamespaceCount } from './memory/model.js';
import { openVectorIndex } from './vector/index.js';
import { FrontEnd, type Route } from './http/server.js';
import { Idempotency } from './http/idempotency.js';
import { nativeLoaded } from './http/uws.js';
import { canonicalIp } from './http/client-address.js';
import { ApiKeys } from './identity/api-keys.js';
import { authRequestKind } from './identity/auth-request-kind.js';
import { AuthRequests } from './identity/auth-requests.js';
import { Identities } from './identity/identities.js';
import { Invites } from './identity/invites.js';
import type { Principal } from './identity/model.js';
import { Registry } from './identity/registry.js';
import { reservationKind } from './reservations/kind.js';
import { Reservations } from './reservations/service.js';
import { Wallets } from './identity/wallets.js';
import { createLogger, requestLogger, type Logger } from './log.js';
import { Actors } from './inspection/actors.js';
import { instrumentStore, Metrics } from './metrics/metrics.js';
import { Runtime } from './runtime/runtime.js';
import { CompanyRecord } from './org/company.js';
import { Discovery } from './org/discovery.js';
import { Peers, peerKind, type Peer } from './org/peers.js';
import { Memberships, membershipKind, migrateLegacyMemberships } from './org/memberships.js';
import { Org } from './org/service.js';
import { indexAgentsOnce, Presence } from './presence/presence.js';
import { ConnectionBoard, instanceName } from './presence/connections.js';
import { Realtime } from './realtime/realtime.js';
import { Stats } from './stats/service.js';
import { Inbox } from './signals/inbox.js';
import { signalKind } from './signals/kind.js';
import { receiptKind } from './signals/receipt-kind.js';
import { Signals } from './signals/service.js';
import { openStore } from './store/index.js';
import { Workspace } from './workspace/service.js';
import { Workstreams } from './workstreams/service.js';
import { Dispatcher } from './webhooks/dispatcher.js';
import { JOURNAL_LOG } from './journal/journal.js';
import { deliveryKind } from './webhooks/model.js';
import { Sender } from './webhooks/sender.js';
import { FederationOut } from './federation/outbound.js';
import { Webhooks } from './webhooks/service.js';
import { rpcRoutes } from './rpc/rpc.js';
import { Mcp, mcpRoutes } from './mcp/mcp.js';
import { A2A, a2aRoutes } from './a2a/a2a.js';
import { methodTable } from './surface/methods.js';
import { Resources as SurfaceResources } from './surface/resources.js';
import type { Store } from './store/port.js';
import { BLOB_REFS_INDEXED } from './blob/refs.js';
import { now } from './clock.js';
import { BlobSweep } from './blob/sweep.js';
import { fastBuiltinPrototypes } from './prototypes.js';

export interface Service {
  port: number;
  url: string;
  store: Store;
  blobs: BlobStore;
  runtime: Runtime;
  /** the push layer, for tests that check its bounds */
  realtime: Realtime;
  /** the front end's live route table (REST, /rpc, /mcp, /a2a), for tests that sweep every route */
  routes: readonly Route<Principal>[];
  /** another memory job worker over this store, as a second instance runs one (tests of the job lease) */
  jobWorker(): { start(): void; stop(): Promise<void> };
  log: Logger;
  close(): Promise<void>;
}

/** A store from before the blob reference index: every artifact's and live revision's content is named once, before any sweep. */
async function indexBlobRefsOnce(store: Store, artifacts: Artifacts, workspace: Workspace): Promise<number> {
  if (await store.get(BLOB_REFS_INDEXED)) return 0;
  const n = (await artifacts.indexBlobRefs()) + (await workspace.indexBlobRefs());
  await store.commit([{ op: 'put', key: BLOB_REFS_INDEXED, value: { at: now() } }]);
  return n;
}

/** a published connection list outlives this many missed beats before it is taken for a crashed instance's */
const BOARD_BEATS = 3;

export async function startService(config: Readonly<Config>, log: Logger = createLogger(config.logLevel)): Promise<Service> {
  if (!nativeLoaded()) throw new Error('uWebSockets.js native binary did not load (Node 20 is required); refusing to run on the slow fallback');
  fastBuiltinPrototypes();
  const rawStore = await openStore(config);
  const metrics = new Metrics(rawStore);
  const store = instrumentStore(withCommitRules(rawStore, [authGenerationRule, reachChangeRule]), metrics);
  const runtime = new Runtime(store, log, config.timerPollMs);
  runtime.register(signalKind);
  runtime.register(receiptKind);
  runtime.register(peerKind);
  runtime.register(membershipKind);
  const sender = new Sender(runtime, config, log);
  runtime.register(deliveryKind((id) => sender.enqueue(id)));
  const dispatcher = new Dispatcher(runtime, config, log);
  const federationOut = new FederationOut(runtime, config, log);
  runtime.register(federationOut.kind());
  runtime.register(authRequestKind);
  runtime.register(memoryJobKind);
  runtime.onTransition((kind, _id, t, prev) => metrics.transition(kind, t, prev));
  runtime.register(reservationKind);
  const openTasks = await indexOpenTasksOnce(store);
  if (openTasks) log.info({ open_tasks: openTasks }, 'open tasks of an older data dir indexed for workflow.next');
  const agents = await indexAgentsOnce(store);
  if (agents) log.info({ agents }, 'agents of an older data dir indexed for the liveness counts');
  const migrated = await migrateLegacyMemberships(runtime);
  if (migrated) log.info({ migrated }, 'legacy membership records moved to the membership actor');
  const org = new Org(runtime);
  const blobs = await openBlobs(config);
  const links = new Links(config.baseUrl);
  const workspace = new Workspace(runtime, blobs, config.maxUploadBytes, config.workspaceDelete, log);
  const artifacts = new Artifacts(runtime, blobs, config.maxUploadBytes, () => links.baseUrl);
  const refs = await indexBlobRefsOnce(store, artifacts, workspace);
  if (refs) log.info({ refs }, 'blob references of an older data dir indexed for the blob sweep');
  const blobSweep = new BlobSweep(store, blobs, { graceMs: config.blobSweepGraceMs, everyMs: config.blobSweepMs }, log);
  // one idempotency store: the Idempotency-Key header, an emit's and a reservation's idempotency_key
  const idempotency = new Idempotency(store, config.idempotencyTtlMs, config.idempotencyLeaseMs);
  const signals = new Signals(runtime, org, config, new Resources(artifacts, workspace), {
    outboundPeer: (peerId, type) => federationOut.outboundPeer(peerId, type),
    deliveryOps: (peerId, call, signalId, body) => federationOut.deliveryOps(peerId, call, signalId, body),
    deliverBody: (c) => FederationOut.deliverBody(c),
    forwardClaim: (c, agent, leaseMs) => federationOut.forwardClaim(c, agent, leaseMs),
    forwardHeartbeat: (c, agent, beat) => federationOut.forwardHeartbeat(c, agent, beat),
  }, idempotency);
  const inbox = new Inbox(runtime, org, signals);
  const health = new Health(store);
  const presence = new Presence(store, { everyMs: config.presenceTouchMs });
  const peers = new Peers(runtime);
  const siwe = new Siwe(store, config.siweNonceTtlMs, () => new URL(links.baseUrl).host);
  const registry = new Registry(config);
  const limits = await RateLimits.open(config);
  const vectorIndex = await openVectorIndex(config);
  if (vectorIndex.info.note) log.warn({ vector_index: vectorIndex.info }, vectorIndex.info.note);
  await indexSharesOnce(store);
  const shares = new Shares(runtime, org);
  // a namespace's recorded owner counts while it holds memories; an emptied one passes to its name's holder
  const namespaceOwner = (ns: string) => store.get<NamespaceCount>(memoryKeys.namespace(ns)).then((r) => (r && r.value.count > 0 ? r.value.owner_id : undefined));
  const acl = new Acl(org, shares, namespaceOwner);
  const memories = new Memories(runtime, acl, openEmbedder(config.embedding), vectorIndex, config, log);
  await memories.open();
  health.report('vector_index', () => vectorIndex.info);
  const jobWorker = () => new Jobs(runtime, memories, artifacts, log, config.memoryJobLeaseMs);
  const jobs = jobWorker();
  const workstreams = new Workstreams(runtime, signals, workspace, artifacts);
  workstreams.register('memory', (p, id) => memories.linkSummary(p, id));
  const trust = new Trust(peers);
  const peerLimits = new PeerLimiter(store, limits, config);
  const inbound = new Inbound(runtime, trust, new Nonces(store), signals, config.taskLeaseMs, peerLimits);
  const services = {
    config,
    links,
    invites: new Invites(runtime, siwe, registry, () => links.baseUrl),
    apiKeys: new ApiKeys(runtime, presence),
    identities: new Identities(runtime, presence, org, registry),
    siwe,
    wallets: new Wallets(runtime, siwe, registry, config.siweSessionTtlMs),
    authRequests: new AuthRequests(runtime, siwe, registry, config.authRequestEnabled),
    audit: new Audit(store),
    org,
    signals,
    inbox,
    health,
    stats: new Stats(store, presence, health),
    metrics,
    workspace,
    artifacts,
    workstreams,
    memories,
    graph: new Graph(runtime, acl, memories),
    shares,
    jobs,
    memoryStats: new MemoryStats(store, memories, jobs),
    actors: new Actors(runtime, auditOps),
    company: new CompanyRecord(store),
    peers,
    memberships: new Memberships(runtime),
    discovery: new Discovery(store, org, peers, () => links.baseUrl),
    webhooks: new Webhooks(runtime, config.allowPrivateNetwork),
    federationOut,
    reservations: new Reservations(runtime, presence, { defaultTtlS: Math.min(3600, config.reservationMaxTtlS), maxTtlS: config.reservationMaxTtlS }, idempotency),
    trust,
    inbound,
    peerLimits,
    connections: {} as { current?: ConnectionBoard },
  };
  const logRequest = requestLogger(log);
  const front = new FrontEnd<Principal>({
    bodyLimit: config.bodyLimitBytes,
    uploadLimit: config.maxUploadBytes,
    links,
    log,
    origins: new Origins(links, config.allowedOrigins),
    unscoped: (p: Principal) => assertUnrestricted(p.key),
    authenticate: async (h, admin, requestId) => {
      const p: Principal = { ...(await authenticate(store, h, admin)), requestId };
      await limits.consume(p);
      p.spend = limits.meter(p);
      void presence.touch(p.identity.id);
      void presence.keyUsed(p.key.id);
      return p;
    },
    verifyProof: (call) => inbound.verify(call),
    peerBudget: (peer) => peerLimits.spend(peer as Peer),
    answered: (a) => {
      metrics.request(a);
      logRequest(a);
    },
    principalHeaders: (p) => (p.rate ? rateHeaders(p.rate) : {}),
    publicBudget: (address) => limits.consumeAddress(address),
    trustedProxies: new Set(config.trustedProxies.map((a) => canonicalIp(a)!)),
    identityOf: (p) => p.identity.id,
    idempotent: (p, key, request, exec) =>
      idempotency.once(p.identity.id, key, request, (claim) => {
        p.claim = claim;
        return exec();
      }),
  });
  // GET /openapi.json describes this array: every route served joins it
  const table = routes(services);
  const serve = (more: Route<Principal>[]) => {
    table.push(...more);
    front.routes(more);
  };
  front.routes(table);
  const methods = methodTable(services);
  serve(rpcRoutes(methods, log));
  const realtime = new Realtime(config, store, log, org, signals, inbox, presence, links, limits);
  const mcp = new Mcp(methods, new SurfaceResources(methods, services), { watch: (p, key, onEntry, onEnded) => realtime.watchJournal(p, key, onEntry, onEnded) }, log, VERSION);
  serve(mcpRoutes(mcp));
  const board = new ConnectionBoard(store, instanceName(), realtime.hub, { ttlMs: BOARD_BEATS * config.presenceTouchMs });
  presence.onBeat(() => board.publish());
  services.connections.current = board;
  serve(a2aRoutes(new A2A({ signals, org, watch: { subscribe: (id, onChange, holder) => realtime.watchSignal(id, onChange, holder) }, links, log, version: VERSION })));
  await realtime.start(front.app, (x, rid, e) => front.fail(x, rid, e));
  metrics.countConnections(() => realtime.hub.subscribers);
  front.finish();
  const port = await front.listen(config.host, config.port);
  links.bound(port, config.baseUrlDefaulted);
  runtime.startTimers();
  jobs.start();
  memories.startSweeper();
  workspace.startSweeper();
  blobSweep.start();
  realtime.hub.holdTrimAt(() => dispatcher.needsFrom(JOURNAL_LOG));
  await dispatcher.start();
  log.info({ port, backend: store.backend }, 'service listening');
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    store,
    blobs,
    runtime,
    realtime,
    routes: front.table,
    jobWorker,
    log,
    async close() {
      front.close();
      await mcp.close();
      await presence.stop();
      await board.stop();
      sender.stop();
      federationOut.stop();
      await dispatcher.stop();
      await realtime.stop();
      memories.stopSweeper();
      await workspace.stop();
      await blobSweep.stop();
      await jobs.stop();
      await runtime.stop();
      await limits.close();
      await vectorIndex.close();
      await store.close();
      await blobs.close();
    },
  };
}
