/** The open connections an instance holds, as the console lists them (the push hub keeps them). */
export interface ConnectionInfo {
  transport: 'websocket' | 'sse';
  identity_id: string;
  key_id: string;
  opened_at: string;
}

export interface ConnectionQuery {
  identity_id?: string;
  key_id?: string;
}

export interface ConnectionLister {
  connections(q?: ConnectionQuery): (ConnectionInfo & { cursor: string; catching_up: boolean })[];
}
