/** Bad input never takes the server down: each answers with a catalogue error and the next request is served. */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, type Member } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError } from './support.js';

describe.each(BACKENDS)('robustness on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
  });

  it('a path parameter that is not valid percent-encoding is 400 with the field, and the server lives on', async () => {
    expectError(await root.client.get('/roles/%E0%A4%A'), 400, 'VALIDATION_INVALID_TYPE', 'id');
    expectError(await root.client.del('/fills/%'), 400, 'VALIDATION_INVALID_TYPE', 'id');
    expectError(await root.client.get('/inbox/%ZZ'), 400, 'VALIDATION_INVALID_TYPE', 'target');
    expect((await root.client.get('/health')).status).toBe(200);
  });

  it('garbage WebSocket frames get error frames and the socket stays usable', async () => {
    const s = await PushSocket.open(svc.url, root.key);
    for (const raw of ['not json', '[1,2]', 'null', '{"op":']) s.send(raw);
    const pong = await s.ok('subscribe', { types: ['pulse'] });
    expect(pong).toEqual({ rings: [], types: ['pulse'] });
    const errors = s.frames.filter((f) => f.type === 'error');
    expect(errors.length).toBe(4);
    for (const e of errors) expect(e.error!.code).toBe('VALIDATION_INVALID_TYPE');
    await s.close();
    expect((await root.client.get('/health')).status).toBe(200);
  });
});
