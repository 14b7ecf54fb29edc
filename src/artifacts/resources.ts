/**
 * `resources` on emit: references to artifacts, workspace items and revisions, each checked to exist and be
 * visible to the emitter. Legacy `attachments` (`{artifact_id}` or a bare artifact id) become artifact
 * resources; the caller answers them with a `Deprecation` header.
 */
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import type { Workspace } from '../workspace/service.js';
import type { Artifacts } from './service.js';

export const RESOURCE_KINDS = ['artifact', 'workspace_item', 'workspace_revision'] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];
export interface ResourceRef {
  kind: ResourceKind;
  id: string;
}

/** RFC 9745: the moment `attachments` was deprecated (2026-11-23T00:00:00Z). */
export const ATTACHMENTS_DEPRECATION = { deprecation: '@1795392000' };

export interface CheckedResources {
  resources: ResourceRef[];
  /** headers the emit answer carries: the Deprecation header when `attachments` was sent */
  headers: Record<string, string>;
}

export class Resources {
  constructor(
    private artifacts: Artifacts,
    private workspace: Workspace,
  ) {}

  /** Throws SIGNAL_EMIT_VALIDATION_FAILED for a malformed entry, the kind's NOT_FOUND for a missing or invisible one. */
  async check(p: Principal, resources: unknown[] | undefined, attachments: unknown[] | undefined): Promise<CheckedResources> {
    const refs = [...(resources ?? []).map((r, i) => asResource(r, `resources[${i}]`)), ...(attachments ?? []).map((a, i) => asAttachment(a, `attachments[${i}]`))];
    const unique = [...new Map(refs.map((r) => [`${r.ref.kind}:${r.ref.id}`, r])).values()];
    await Promise.all(unique.map(({ ref, field }) => this.visible(p, ref, field)));
    return { resources: unique.map((r) => r.ref), headers: attachments !== undefined ? { ...ATTACHMENTS_DEPRECATION } : {} };
  }

  private async visible(p: Principal, ref: ResourceRef, field: string): Promise<void> {
    const details = { field, kind: ref.kind, id: ref.id };
    if (ref.kind === 'artifact') {
      if (!(await this.artifacts.find(p, ref.id))) throw new AppError('ARTIFACT_NOT_FOUND', `No artifact ${ref.id}`, details);
    } else if (ref.kind === 'workspace_item') {
      await this.workspace.item(p, ref.id).catch((e) => rethrow(e, details));
    } else {
      await this.workspace.revisionOf(p, ref.id).catch((e) => rethrow(e, details));
    }
  }
}

function rethrow(e: unknown, details: Record<string, unknown>): never {
  if (e instanceof AppError && e.status === 404) throw new AppError(e.code, e.message, details);
  throw e;
}

const invalid = (field: string, why: string) => new AppError('SIGNAL_EMIT_VALIDATION_FAILED', `${field}: ${why}`, { field });

function asResource(r: unknown, field: string): { ref: ResourceRef; field: string } {
  const o = r as { kind?: unknown; id?: unknown };
  if (typeof r !== 'object' || r === null) throw invalid(field, 'must be an object {kind, id}');
  if (!RESOURCE_KINDS.includes(o.kind as ResourceKind)) throw invalid(field, `kind must be one of ${RESOURCE_KINDS.join(', ')}`);
  if (typeof o.id !== 'string' || !o.id) throw invalid(field, 'id must be a non-empty string');
  return { ref: { kind: o.kind as ResourceKind, id: o.id }, field };
}

function asAttachment(a: unknown, field: string): { ref: ResourceRef; field: string } {
  const id = typeof a === 'string' ? a : typeof a === 'object' && a !== null ? (a as { artifact_id?: unknown }).artifact_id : undefined;
  if (typeof id !== 'string' || !id) throw invalid(field, 'must be an artifact id or {artifact_id}');
  return { ref: { kind: 'artifact', id }, field };
}
