/** A workstream: a named line of work that links the signals, memories, files, artifacts and other workstreams it concerns. */
export const WORKSTREAM_STATUSES = ['active', 'paused', 'done'] as const;
export type WorkstreamStatus = (typeof WORKSTREAM_STATUSES)[number];
export const LINK_KINDS = ['signal', 'memory', 'workspace_item', 'artifact', 'workstream'] as const;
export type LinkKind = (typeof LINK_KINDS)[number];

export interface Link {
  kind: LinkKind;
  id: string;
  linked_by: string;
  linked_at: string;
}

export interface Workstream {
  id: string;
  name: string;
  description: string;
  status: WorkstreamStatus;
  tags: string[];
  /** kept in the record: a link and its workstream change together, under one version check */
  links: Link[];
  created_by: string;
  created_at: string;
  updated_at: string;
}

export const MAX_LINKS = 1000;

export const workstreamKeys = { workstream: (id: string) => `workstream:${id}` };
export const workstreamIndexes = { all: 'workstreams' };
