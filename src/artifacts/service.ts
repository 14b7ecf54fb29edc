/**
 * Artifacts: immutable uploads, listed by tag, content type, uploader and time, downloadable in ranges,
 * shareable through time-limited links: presigned by S3 itself on S3, HMAC-signed by the service
 * (`GET /artifacts/:id/shared?expires&sig`) on the filesystem.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import { encodeTime } from 'ulid';
import { iso, now } from '../clock.js';
import { eventOp } from '../journal/journal.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op, Store } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import { openContent, type Content } from '../blob/content.js';
import type { BlobStore } from '../blob/port.js';
import { requireMember } from '../workspace/access.js';
import { artifactIndexes, artifactIndexesOf, artifactKeys, type Artifact, type Visibility } from './model.js';

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
    const a = (await this.store.get<Artifact>(artifactKeys.artifact(id)))?.value;
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
    if (!f.name || f.name.length > 255) throw new AppError('ARTIFACT_VALIDATION_FAILED', 'name must be 1-255 characters', { field: 'name' });
    const stored = await this.blobs.put(content, this.maxUploadBytes);
    const a: Artifact = {
      id: newId(), name: f.name, content_type: contentType, size: stored.size, sha256: stored.sha256, tags: [...new Set(f.tags ?? [])],
      metadata: f.metadata ?? {}, visibility: f.visibility ?? 'org', uploaded_by: p.identity.id, created_at: iso(),
    };
    const ops: Op[] = [
      { op: 'put', key: artifactKeys.artifact(a.id), value: a, expect: 0 },
      ...artifactIndexesOf(a).map(([index, member]): Op => ({ op: 'index', index, member })),
      eventOp({ type: 'artifact.uploaded', subject: 'artifact', data: a, audience: a.visibility === 'private' ? { identities: [a.uploaded_by] } : { members: true } }),
    ];
    const res = await this.store.commit(ops);
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

  async content(p: Principal, id: string, range: string | undefined): Promise<Content> {
    return this.contentOf(await this.get(p, id), range);
  }

  private contentOf(a: Artifact, range: string | undefined): Promise<Content> {
    return openContent(this.blobs, { sha256: a.sha256, size: a.size, content_type: a.content_type, filename: a.name, etag: a.sha256 }, range);
  }

  /** Removes the record; the bytes stay, as other artifacts or revisions with the same content may share them. */
  async remove(p: Principal, id: string): Promise<Artifact> {
    requireMember(p);
    return this.rt.retry(async () => {
      const cur = await this.store.get<Artifact>(artifactKeys.artifact(id));
      if (!cur || !Artifacts.canSee(p, cur.value)) throw new AppError('ARTIFACT_NOT_FOUND', `No artifact ${id}`);
      if (cur.value.uploaded_by !== p.identity.id && !p.identity.is_admin) throw new AppError('ARTIFACT_DELETE_DENIED');
      const ops: Op[] = [{ op: 'del', key: artifactKeys.artifact(id), expect: cur.version }, ...artifactIndexesOf(cur.value).map(([index, member]): Op => ({ op: 'index', index, member, remove: true }))];
      return { result: cur.value, ops };
    });
  }

  async share(p: Principal, id: string, expiresInS: number): Promise<{ url: string; expires_at: string }> {
    const a = await this.get(p, id);
    const expires = Math.floor(now() / 1000) + expiresInS;
    const presigned = await this.blobs.presign(a.sha256, expiresInS, { contentType: a.content_type, filename: a.name });
    if (presigned) return { url: presigned, expires_at: iso(expires * 1000) };
    const sig = await this.sign(a.id, expires);
    return { url: `${this.baseUrl()}/artifacts/${encodeURIComponent(a.id)}/shared?expires=${expires}&sig=${sig}`, expires_at: iso(expires * 1000) };
  }

  /** Serves a filesystem share link: the signature must match and the link must not have expired. */
  async shared(id: string, expires: string | undefined, sig: string | undefined, range: string | undefined): Promise<Content> {
    const at = Number(expires);
    const valid = expires !== undefined && /^\d{1,12}$/.test(expires) && sig !== undefined && safeEqual(sig, await this.sign(id, at));
    if (!valid) throw new AppError('ARTIFACT_SHARE_INVALID', 'The share link is not valid');
    if (at * 1000 <= now()) throw new AppError('ARTIFACT_SHARE_INVALID', 'The share link has expired', { expired_at: iso(at * 1000) });
    const a = (await this.store.get<Artifact>(artifactKeys.artifact(id)))?.value;
    if (!a) throw new AppError('ARTIFACT_NOT_FOUND', `No artifact ${id}`);
    return this.contentOf(a, range);
  }

  private async sign(id: string, expires: number): Promise<string> {
    return createHmac('sha256', await this.secret()).update(`${id}.${expires}`).digest('base64url');
  }

  private secretCache: Buffer | undefined;
  private async secret(): Promise<Buffer> {
    if (this.secretCache) return this.secretCache;
    const fresh = randomBytes(32).toString('base64url');
    await this.store.commit([{ op: 'put', key: artifactKeys.shareSecret, value: { secret: fresh }, expect: 0 }]);
    // whoever wrote first wins: every instance reads the same secret back
    const s = await this.store.get<{ secret: string }>(artifactKeys.shareSecret);
    return (this.secretCache = Buffer.from(s!.value.secret, 'base64url'));
  }
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
