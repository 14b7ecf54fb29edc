/** An artifact: immutable content with a name, uploaded once; its bytes live in the blob store under their SHA-256. */
export type Visibility = 'org' | 'private';

export interface Artifact {
  id: string;
  name: string;
  content_type: string;
  size: number;
  sha256: string;
  tags: string[];
  metadata: Record<string, unknown>;
  /** org: every member; private: the uploader and admins */
  visibility: Visibility;
  uploaded_by: string;
  created_at: string;
}

export const artifactKeys = {
  artifact: (id: string) => `artifact:${id}`,
  /** where the share-link key lived before it moved out of the artifact keyspace: read once, to adopt it */
  legacyShareSecret: 'artifact:share-secret',
};

/** ids are ULIDs: anything else is refused before a lookup, so no other record can be read as an artifact */
export const isArtifactId = (id: string): boolean => /^[0-9A-HJKMNP-TV-Z]{26}$/.test(id);
export const artifactIndexes = {
  all: 'artifacts',
  byTag: (tag: string) => `artifacts:tag:${tag}`,
  byUploader: (identityId: string) => `artifacts:by:${identityId}`,
};

export function artifactIndexesOf(a: Artifact): [string, string][] {
  return [[artifactIndexes.all, a.id], [artifactIndexes.byUploader(a.uploaded_by), a.id], ...a.tags.map((t): [string, string] => [artifactIndexes.byTag(t), a.id])];
}
