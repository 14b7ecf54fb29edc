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

/**
 * The deletion of an item and everything below it, keyed by the item's id: a folder's children are deleted a
 * page per commit after the folder itself, and this record, written in each of those commits, says how far it is.
 */
export interface Deletion {
  id: string;
  status: 'running' | 'completed';
  /** items deleted so far, the item itself included */
  deleted: number;
  /** deleted folders whose children are still being deleted */
  folders_left: number;
  deleted_by: string;
  started_at: string;
  updated_at: string;
  completed_at: string | null;
}

/** The stored record: the running sweep's hold (ms); once it lapses any instance takes the deletion over. */
export interface DeletionRecord extends Deletion {
  lease_until: number;
}

const ROOT = '~';
export const workspaceKeys = {
  item: (id: string) => `ws:item:${id}`,
  revision: (id: string) => `ws:rev:${id}`,
  /** unique name within a folder, case-insensitive */
  name: (parentId: string | null, name: string) => `ws:name:${parentId ?? ROOT}:${name.toLowerCase()}`,
  deletion: (id: string) => `ws:deletion:${id}`,
};
export const workspaceIndexes = {
  children: (parentId: string | null) => `ws:children:${parentId ?? ROOT}`,
  revisions: (itemId: string) => `ws:revs:${itemId}`,
  /** deletions still running (a crash leaves them here to finish) */
  deleting: 'ws:deleting',
  /** the deleted folders of one deletion whose children are still being deleted */
  deletionFolders: (id: string) => `ws:deletion-folders:${id}`,
};
