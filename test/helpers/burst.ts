/**
 * Requests that reach the server together: each on its own keep-alive connection, opened and answered once
 * first, then all written in one synchronous step. The in-process server reads them in one poll of the event
 * loop, so tests of what happens to calls waiting side by side (fair turns) do not depend on arrival timing.
 */
import { connect, type Socket } from 'node:net';

export interface BurstRequest {
  method: string;
  path: string;
  key: string;
  body?: unknown;
}

interface Reply {
  status: number;
  body: any;
}

/** `warmedUp` runs once every connection is open and answered, just before the burst is written. */
export async function burst(url: string, requests: BurstRequest[], warmedUp?: () => Promise<void>): Promise<Reply[]> {
  const { hostname, port } = new URL(url);
  const conns = await Promise.all(requests.map(() => Conn.open(hostname, Number(port))));
  try {
    await Promise.all(conns.map(async (c) => expect200(await c.send({ method: 'GET', path: '/health', key: '' }))));
    await warmedUp?.();
    const replies = requests.map((r, i) => conns[i].send(r));
    return await Promise.all(replies);
  } finally {
    for (const c of conns) c.socket.destroy();
  }
}

function expect200(r: Reply): void {
  if (r.status !== 200) throw new Error(`warm-up answered ${r.status}`);
}

class Conn {
  private buf = Buffer.alloc(0);
  private waiting: ((r: Reply) => void) | undefined;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      this.parse();
    });
  }

  static open(host: string, port: number): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const s = connect({ host, port }, () => resolve(new Conn(s)));
      s.once('error', reject);
    });
  }

  /** Writes the request at once (the socket is open and idle) and answers its reply. */
  send(r: BurstRequest): Promise<Reply> {
    const body = r.body === undefined ? '' : JSON.stringify(r.body);
    const head = [`${r.method} ${r.path} HTTP/1.1`, 'host: burst', 'connection: keep-alive', `content-length: ${Buffer.byteLength(body)}`];
    if (r.key) head.push(`authorization: Bearer ${r.key}`);
    if (body) head.push('content-type: application/json');
    const reply = new Promise<Reply>((resolve) => (this.waiting = resolve));
    this.socket.write(head.join('\r\n') + '\r\n\r\n' + body);
    return reply;
  }

  private parse(): void {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0 || !this.waiting) return;
    const lines = this.buf.subarray(0, end).toString().split('\r\n');
    const length = Number(/^content-length:\s*(\d+)$/im.exec(lines.join('\n'))?.[1]);
    if (!Number.isFinite(length)) throw new Error(`burst: a reply without content-length: ${lines[0]}`);
    if (this.buf.length < end + 4 + length) return;
    const text = this.buf.subarray(end + 4, end + 4 + length).toString();
    this.buf = this.buf.subarray(end + 4 + length);
    const done = this.waiting;
    this.waiting = undefined;
    done({ status: Number(lines[0].split(' ')[1]), body: text ? JSON.parse(text) : null });
  }
}
