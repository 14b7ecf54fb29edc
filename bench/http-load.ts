/**
 * Closed-loop HTTP load generator, run as its own process by the bench scripts: LOAD_CONNECTIONS keep-alive
 * connections each send one request after another until LOAD_REQUESTS were sent (or LOAD_SECONDS passed).
 * Prints one JSON line: requests, non-2xx count, seconds, req/s, p50/p99 latency in ms.
 *
 * Env: LOAD_URL, LOAD_METHOD (GET), LOAD_BODY, LOAD_KEY (Bearer), LOAD_CONNECTIONS (50), LOAD_REQUESTS (0 = unbounded),
 * LOAD_SECONDS (0 = unbounded).
 */
import { Agent, request } from 'node:http';
import { intEnv, percentile } from './lib.js';

const url = new URL(process.env.LOAD_URL!);
const method = process.env.LOAD_METHOD ?? 'GET';
const body = process.env.LOAD_BODY;
const conns = intEnv('LOAD_CONNECTIONS', 50, 1);
const total = intEnv('LOAD_REQUESTS', 0);
const seconds = intEnv('LOAD_SECONDS', 0);
const agent = new Agent({ keepAlive: true, maxSockets: conns });
const headers: Record<string, string | number> = {};
if (process.env.LOAD_KEY) headers.authorization = `Bearer ${process.env.LOAD_KEY}`;
if (body) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });

const lat: number[] = [];
let sent = 0;
let non2xx = 0;
const start = performance.now();
const deadline = seconds > 0 ? start + seconds * 1000 : Infinity;

function once(): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const req = request({ agent, host: url.hostname, port: url.port, path: url.pathname, method, headers }, (res) => {
      res.resume();
      res.on('end', () => {
        lat.push(performance.now() - t);
        if ((res.statusCode ?? 0) >= 300) non2xx++;
        resolve();
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function worker(): Promise<void> {
  while ((total === 0 || sent < total) && performance.now() < deadline) {
    sent++;
    await once();
  }
}

await Promise.all(Array.from({ length: conns }, worker));
const secs = (performance.now() - start) / 1000;
lat.sort((a, b) => a - b);
console.log(JSON.stringify({ requests: lat.length, non2xx, seconds: secs, rps: lat.length / secs, p50: percentile(lat, 50), p99: percentile(lat, 99) }));
agent.destroy();
