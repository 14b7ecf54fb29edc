/** A plain HTTP client over fetch, and the bootstrap path every API test starts from. */
export interface Res<T = any> {
  status: number;
  body: T;
}

export class Client {
  constructor(
    readonly url: string,
    readonly key?: string,
  ) {}

  as(key: string | undefined): Client {
    return new Client(this.url, key);
  }

  async req<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res<T>> {
    const h: Record<string, string> = { ...headers };
    if (this.key) h.authorization = `Bearer ${this.key}`;
    if (body !== undefined) h['content-type'] = 'application/json';
    const r = await fetch(this.url + path, { method, headers: h, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  }

  get<T = any>(path: string) {
    return this.req<T>('GET', path);
  }
  post<T = any>(path: string, body: unknown = {}) {
    return this.req<T>('POST', path, body);
  }
  put<T = any>(path: string, body: unknown = {}) {
    return this.req<T>('PUT', path, body);
  }
  patch<T = any>(path: string, body: unknown = {}) {
    return this.req<T>('PATCH', path, body);
  }
  del<T = any>(path: string) {
    return this.req<T>('DELETE', path);
  }
}

export interface Member {
  id: string;
  name: string;
  key: string;
  client: Client;
}

/** Bootstraps an empty instance: the first invite needs no key and makes the admin. */
export async function bootstrap(url: string, name = 'root'): Promise<Member> {
  const anon = new Client(url);
  const inv = await anon.post('/invite/create', { name, type: 'human' });
  if (inv.status !== 201) throw new Error(`bootstrap invite failed: ${JSON.stringify(inv.body)}`);
  const red = await anon.post('/invite', { code: inv.body.data.code, name, type: 'human' });
  if (red.status !== 201) throw new Error(`bootstrap redeem failed: ${JSON.stringify(red.body)}`);
  const key = red.body.data.api_key;
  return { id: red.body.data.identity.id, name, key, client: new Client(url, key) };
}

/** An admin invites and a new identity redeems. */
export async function join(admin: Client, name: string, extra: Record<string, unknown> = {}): Promise<Member> {
  const inv = await admin.post('/invite/create', { name, type: 'agent' });
  if (inv.status !== 201) throw new Error(`invite failed: ${JSON.stringify(inv.body)}`);
  const red = await new Client(admin.url).post('/invite', { code: inv.body.data.code, name, type: 'agent', ...extra });
  if (red.status !== 201) throw new Error(`redeem failed: ${JSON.stringify(red.body)}`);
  const key = red.body.data.api_key;
  return { id: red.body.data.identity.id, name, key, client: new Client(admin.url, key) };
}
