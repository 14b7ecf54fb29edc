/** Workspace records: folders and files in a tree, and the immutable revisions of each file. */
export type ItemKind = 'folder' | 'file';

export interface WorkspaceItem {
  id: string;
  kind: ItemKind;
  name: string;
  /** null: top level */
  parent_id: string | null;
  tags: string[];
  metadata: Record<string, unknown>;
  created_by: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  /** files only (null on folders) */
  current_revision_id: string | null;
  revision_count: number;
  content_type: string | null;
  size: number | null;
  sha256: string | null;
}

export interface Revision {
  id: string;
  item_id: string;
  number: number;
  sha256: string;
  size: number;
  content_type: string;
  created_by: string;
  created_at: string;
}

const ROOT = '~';
export const workspaceKeys = {
  item: (id: string) => `ws:item:${id}`,
  revision: (id: string) => `ws:rev:${id}`,
  /** unique name within a folder, case-insensitive */
  name: (parentId: string | null, name: string) => `ws:name:${parentId ?? ROOT}:${name.toLowerCase()}`,
};
export const workspaceIndexes = {
  children: (parentId: string | null) => `ws:children:${parentId ?? ROOT}`,
  revisions: (itemId: string) => `ws:revs:${itemId}`,
  /** deleted folders whose children are still being deleted (a crash leaves them here to finish) */
  deleting: 'ws:deleting',
};
