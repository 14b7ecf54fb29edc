/**
 * Artifacts: immutable uploads, listed by tag, content type, uploader and time, downloadable in ranges,
 * shareable through time-limited links: presigned by S3 itself on S3, HMAC-signed by the service
 * (`GET /artifacts/:id/shared?expires&kid&sig`) on the filesystem, with a key kept outside every keyspace
 * a route can address (`secret:artifact-share`) that an admin rotates.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import { encodeTime } from 'ulid';
import { iso, now } from '../clock.js';
import { eventOp } from '../journal/journal.js';
import { AppError } from '../errors.js';
import { boundKey } from '../validation.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op, Store } from '../store/port.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import { forEachPage, scanDesc, type Scanned } from '../store/scan.js';
import { blobRefOp } from '../blob/refs.js';
import { openContent, type Content, type RangeAsk } from '../blob/content.js';
import type { BlobStore } from '../blob/port.js';
import { requireMember } from '../workspace/access.js';
import { artifactIndexes, artifactIndexesOf, artifactKeys, isArtifactId, type Artifact, type Visibility } from './model.js';
import { auditOps } from '../audit/audit.js';
import { secretKey } from '../store/secrets.js';

export interface ArtifactFields {
  name: string;
  tags?: string[];
  metadata?: Record<string, unknown>;
  visibility?: Visibility;
}

export interface ArtifactFilter {
  tag?: string;
  content_type?: string;
  uploaded_by?: string;
  since?: number;
}

export const SHARE_MAX_S = 7 * 24 * 3600;

export class Artifacts {
  constructor(
    private rt: Runtime,
    private blobs: BlobStore,
    private maxUploadBytes: number,
    /** the service's public URL (known once the port is bound) */
    private baseUrl: () => string,
  ) {}

  private get store(): Store {
    return this.rt.store;
  }

  static canSee(p: Principal, a: Artifact): boolean {
    return a.visibility === 'org' || a.uploaded_by === p.identity.id || p.identity.is_admin;
  }

  /** The artifact if it exists and the caller may see it; a private one of someone else is as absent as a missing one. */
  async find(p: Principal, id: string): Promise<Artifact | undefined> {
    const a = isArtifactId(id) ? (await this.store.get<Artifact>(artifactKeys.artifact(id)))?.value : undefined;
    return a && Artifacts.canSee(p, a) ? a : undefined;
  }

  async get(p: Principal, id: string): Promise<Artifact> {
    requireMember(p);
    const a = await this.find(p, id);
    if (!a) throw new AppError('ARTIFACT_NOT_FOUND', `No artifact ${id}`);
    return a;
  }

  async upload(p: Principal, f: ArtifactFields, content: Readable, contentType: string): Promise<Artifact> {
    requireMember(p);
    // an earlier attempt of this request that died after its commit: its artifact is the answer
    return committedEffect<Artifact>(p) ?? this.create(p.identity.id, f, content, contentType, p);
  }

  /** An artifact uploaded on behalf of an identity by another part of the service (a memory export). */
  async create(uploadedBy: string, f: ArtifactFields, content: Readable, contentType: string, request?: Principal): Promise<Artifact> {
    boundKey(f.name, 'name', 'name', 'ARTIFACT_VALIDATION_FAILED');
    f.tags?.forEach((t, i) => boundKey(t, `tags.${i}`, 'tag', 'ARTIFACT_VALIDATION_FAILED'));
    const stored = await this.blobs.put(content, this.maxUploadBytes);
    const a: Artifact = {
      id: newId(), name: f.name, content_type: contentType, size: stored.size, sha256: stored.sha256, tags: [...new Set(f.tags ?? [])],
      metadata: f.metadata ?? {}, visibility: f.visibility ?? 'org', uploaded_by: uploadedBy, created_at: iso(),
    };
    const ops: Op[] = [
      { op: 'put', key: artifactKeys.artifact(a.id), value: a, expect: 0 },
      ...artifactIndexesOf(a).map(([index, member]): Op => ({ op: 'index', index, member })),
      blobRefOp(a.sha256, artifactKeys.artifact(a.id)),
      eventOp({ type: 'artifact.uploaded', subject: 'artifact', data: a, audience: a.visibility === 'private' ? { identities: [a.uploaded_by] } : { members: true } }),
      ...effectOps(request, a),
    ];
    const res = await this.store.commit(ops);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'artifact id collision');
    return a;
  }

  async list(p: Principal, f: ArtifactFilter, before: string | undefined, limit: number): Promise<Scanned<Artifact>> {
    requireMember(p);
    const index = f.tag !== undefined ? artifactIndexes.byTag(f.tag) : f.uploaded_by !== undefined ? artifactIndexes.byUploader(f.uploaded_by) : artifactIndexes.all;
    return scanDesc(this.store, [index], {
      before,
      // ULIDs start with their time; a second of slack covers the id being minted just before created_at
      after: f.since !== undefined ? encodeTime(Math.max(0, f.since - 1000)) : undefined,
      limit,
      load: async (ids) => (await this.store.getMany<Artifact>(ids.map(artifactKeys.artifact))).map((r) => r?.value),
      keep: (a) =>
        Artifacts.canSee(p, a) &&
        (f.content_type === undefined || a.content_type === f.content_type) &&
        (f.uploaded_by === undefined || a.uploaded_by === f.uploaded_by) &&
        (f.since === undefined || Date.parse(a.created_at) >= f.since),
    });
  }

  async content(p: Principal, id: string, range: RangeAsk | undefined): Promise<Content> {
    return this.contentOf(await this.get(p, id), range);
  }

  private contentOf(a: Artifact, range: RangeAsk | undefined): Promise<Content> {
    return openContent(this.blobs, { sha256: a.sha256, size: a.size, content_type: a.content_type, filename: a.name, etag: a.sha256 }, range);
  }

  /** Names, in the blob reference index, the content of every artifact (records from before that index). */
  async indexBlobRefs(): Promise<number> {
    let n = 0;
    await forEachPage(this.store, artifactIndexes.all, async (ids) => {
      const found = (await this.store.getMany<Artifact>(ids.map(artifactKeys.artifact))).flatMap((r) => (r ? [r.value] : []));
      if (found.length) await this.store.commit(found.map((a) => blobRefOp(a.sha256, artifactKeys.artifact(a.id))));
      n += found.length;
    });
    return n;
  }

  /** Removes the record and its blob reference; the bytes go with the sweep once no other record names them (docs/storage.md). */
  async remove(p: Principal, id: string): Promise<Artifact> {
    requireMember(p);
    if (!isArtifactId(id)) throw new AppError('ARTIFACT_NOT_FOUND', `No artifact ${id}`);
    return this.rt.retry(async () => {
      const cur = await this.store.get<Artifact>(artifactKeys.artifact(id));
      if (!cur || !Artifacts.canSee(p, cur.value)) throw new AppError('ARTIFACT_NOT_FOUND', `No artifact ${id}`);
      if (cur.value.uploaded_by !== p.identity.id && !p.identity.is_admin) throw new AppError('ARTIFACT_DELETE_DENIED');
      const ops: Op[] = [
        { op: 'del', key: artifactKeys.artifact(id), expect: cur.version },
        ...artifactIndexesOf(cur.value).map(([index, member]): Op => ({ op: 'index', index, member, remove: true })),
        blobRefOp(cur.value.sha256, artifactKeys.artifact(id), true),
      ];
      return { result: cur.value, ops };
    });
  }

  async share(p: Principal, id: string, expiresInS: number): Promise<{ url: string; expires_at: string }> {
    const a = await this.get(p, id);
    // rounded up: a link lives at least the seconds asked for (rounded down, a 1 s link could be dead on arrival)
    const expires = Math.ceil(now() / 1000) + expiresInS;
    const presigned = await this.blobs.presign(a.sha256, expiresInS, { contentType: a.content_type, filename: a.name });
    if (presigned) return { url: presigned, expires_at: iso(expires * 1000) };
    const key = await this.shareKey();
    const q = new URLSearchParams({ expires: String(expires), kid: key.kid, sig: sign(key, a.id, expires) });
    return { url: `${this.baseUrl()}/artifacts/${encodeURIComponent(a.id)}/shared?${q}`, expires_at: iso(expires * 1000) };
  }

  /** Serves a filesystem share link: signed by the current key (`kid`), not expired. */
  async shared(id: string, expires: string | undefined, kid: string | undefined, sig: string | undefined, range: RangeAsk | undefined): Promise<Content> {
    const at = Number(expires);
    const key = await this.shareKey();
    // a link from before links named their key was signed by the key adopted as LEGACY_KID
    const valid = isArtifactId(id) && expires !== undefined && /^\d{1,12}$/.test(expires) && sig !== undefined && (kid ?? LEGACY_KID) === key.kid && safeEqual(sig, sign(key, id, at));
    if (!valid) throw new AppError('ARTIFACT_SHARE_INVALID', 'The share link is not valid');
    if (at * 1000 <= now()) throw new AppError('ARTIFACT_SHARE_INVALID', 'The share link has expired', { expired_at: iso(at * 1000) });
    const a = (await this.store.get<Artifact>(artifactKeys.artifact(id)))?.value;
    if (!a) throw new AppError('ARTIFACT_NOT_FOUND', `No artifact ${id}`);
    return this.contentOf(a, range);
  }

  /** A new share-link key: every link signed before stops working, on every instance at its next use. Audited. */
  async rotateShareKey(admin: Principal): Promise<{ kid: string; rotated_at: string }> {
    await this.shareKey();
    return this.rt.retry(async () => {
      const cur = await this.store.get<ShareKey>(secretKey(SHARE_KEY));
      const next: ShareKey = { kid: newId(), secret: randomBytes(32).toString('base64url'), created_at: iso() };
      const ops: Op[] = [
        { op: 'put', key: secretKey(SHARE_KEY), value: next, expect: cur?.version ?? 0 },
        ...auditOps({ actor: admin.identity.id, action: 'artifact.share_key.rotate', target: null, requestId: admin.requestId, details: { kid: next.kid, previous_kid: cur?.value.kid ?? null } }),
      ];
      return { result: { kid: next.kid, rotated_at: next.created_at }, ops };
    });
  }

  /**
   * The current share-link key, read on every use so a rotation holds on every instance at once; made on
   * first use (whoever writes first wins). A key from the artifact keyspace, where it once lived, is adopted.
   */
  private async shareKey(): Promise<ShareKey> {
    const cur = await this.store.get<ShareKey>(secretKey(SHARE_KEY));
    if (cur) return cur.value;
    const legacy = await this.store.get<{ secret: string }>(artifactKeys.legacyShareSecret);
    const fresh: ShareKey = legacy ? { kid: LEGACY_KID, secret: legacy.value.secret, created_at: iso() } : { kid: newId(), secret: randomBytes(32).toString('base64url'), created_at: iso() };
    await this.store.commit([{ op: 'put', key: secretKey(SHARE_KEY), value: fresh, expect: 0 }, ...(legacy ? [{ op: 'del', key: artifactKeys.legacyShareSecret } as Op] : [])]);
    return (await this.store.get<ShareKey>(secretKey(SHARE_KEY)))!.value;
  }
}

const SHARE_KEY = 'artifact-share';
const LEGACY_KID = 'legacy';

interface ShareKey {
  kid: string;
  secret: string;
  created_at: string;
}

const sign = (key: ShareKey, id: string, expires: number): string => createHmac('sha256', Buffer.from(key.secret, 'base64url')).update(`${id}.${expires}`).digest('base64url');

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
