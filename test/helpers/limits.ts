/** Requests that read the rate-limit headers (the JSON client does not expose headers). */
/** GET with a key, answering status, body and the rate-limit headers. */
export async function limited(url: string, key: string, path = '/roles') {
  const r = await fetch(url + path, { headers: { authorization: `Bearer ${key}` } });
  const h = (n: string) => r.headers.get(n);
  return { status: r.status, body: await r.json(), limit: h('ratelimit-limit'), remaining: h('ratelimit-remaining'), reset: h('ratelimit-reset'), retryAfter: h('retry-after') };
}
