/**
 * A2A with the @a2a-js/sdk client, on both backends: the public agent card, a message that becomes a task
 * signal (same id), a stream of status updates while an agent claims and acks over REST, get and cancel
 * with the interface's refusals, the v0.3 method names, and auth refusals; a stream ends once its key is revoked.
 */
import { AGENT_CARD_PATH, AgentCard, TaskState, type Message, type SendMessageRequest } from '@a2a-js/sdk';
import { isLegacyAgentCard, parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { Ajv } from 'ajv';
import { readFile } from 'node:fs/promises';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client as A2AClient } from '@a2a-js/sdk/client';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

const authed = (key: string): typeof fetch => (input, init) => {
  const headers = new Headers(init?.headers);
  headers.set('authorization', `Bearer ${key}`);
  return fetch(input, { ...init, headers });
};

async function a2aClient(url: string, key: string): Promise<A2AClient> {
  const fetchImpl = authed(key);
  const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) });
  return factory.createFromUrl(url);
}

function message(text: string, metadata: Record<string, unknown>): SendMessageRequest {
  const m: Message = { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [{ content: { $case: 'text', value: text }, metadata: {}, filename: '', mediaType: 'text/plain' }], metadata, extensions: [], referenceTaskIds: [] };
  return { tenant: '', message: m, configuration: undefined, metadata: {} };
}

/** A stream event (task or status update) as {id, state}. */
const flat = (ev: any) => {
  const v = ev.payload?.value;
  return { id: ev.payload?.$case === 'task' ? v.id : v.taskId, state: v.status?.state };
};

/** The SDK's error carries the JSON-RPC error; ours puts the catalogue code in error.data.code. */
async function refusedWith(p: Promise<unknown>, code: string): Promise<void> {
  const e: any = await p.then(
    () => undefined,
    (err) => err,
  );
  expect(e, 'expected a refusal').toBeDefined();
  expect(JSON.stringify(e.errorResponse ?? e.cause ?? e) + String(e.message)).toContain(code);
}

for (const backend of BACKENDS) {
  describe(`A2A on ${backend}`, () => {
    const servers = serversOn(backend);
    let url: string;
    let root: Member;
    let alice: Member;
    let bob: Member;
    let carol: Member;
    let a: A2AClient;

    beforeAll(async () => {
      url = (await servers.start()).url;
      root = await bootstrap(url);
      alice = await join(root.client, 'alice');
      bob = await join(root.client, 'bob');
      carol = await join(root.client, 'carol');
      expectOk(await root.client.post('/roles', { name: 'Builder', purpose: 'builds things', domains: ['code'] }), 201);
      expectOk(await root.client.post('/fills', { identity_id: bob.id, role_id: (await root.client.get('/roles')).body.data[0].id }), 201);
      a = await a2aClient(url, alice.key);
    });

    it('serves the agent card as the JSON of each version it declares: v1.0 ProtoJSON to the SDK resolver, v0.3 (the published schema) to a client naming none', async () => {
      const cardUrl = `${url}/${AGENT_CARD_PATH}`;
      const skillNames = ['Send a signal or task', 'Builder'];
      // the endpoint under BASE_URL (unset here: localhost on the bound port)
      const endpoint = `http://localhost:${new URL(url).port}/a2a`;
      // v1.0: what the official client's resolver asks for (A2A-Version: 1.0) and parses
      const v1 = await fetch(cardUrl, { headers: { 'A2A-Version': '1.0' } });
      expect(v1.headers.get('vary')).toContain('A2A-Version');
      const raw = await v1.json();
      expect(JSON.stringify(raw)).not.toContain('$case');
      expect(raw).toMatchObject({ name: 'agent-coordination-service', capabilities: { streaming: true }, securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: 'bearer' } } }, securityRequirements: [{ schemes: { bearer: {} } }] });
      expect(raw.supportedInterfaces).toEqual(['1.0', '0.3'].map((protocolVersion) => ({ url: endpoint, protocolBinding: 'JSONRPC', protocolVersion })));
      // canonical ProtoJSON: the SDK's codec reads it and writes it back unchanged
      expect(AgentCard.toJSON(AgentCard.fromJSON(raw))).toEqual(raw);
      const resolved = await new DefaultAgentCardResolver().resolve(url);
      expect(resolved.securitySchemes.bearer.scheme).toMatchObject({ $case: 'httpAuthSecurityScheme', value: { scheme: 'bearer', bearerFormat: 'API key' } });
      expect(resolved.skills.map((s) => s.name)).toEqual(skillNames);
      expect(resolved.skills[1]).toMatchObject({ name: 'Builder', description: 'builds things', tags: expect.arrayContaining(['code']) });
      expect(a.protocolVersion).toBe('1.0');
      // v0.3: a request without A2A-Version is v0.3's (v1.0 says so), and one naming 0.3
      const schema = JSON.parse(await readFile(new URL('../fixtures/a2a/a2a-v0.3.0.schema.json', import.meta.url), 'utf8'));
      const check = new Ajv({ strict: false, allErrors: true }).addSchema(schema, 'a2a-v0.3.0').getSchema('a2a-v0.3.0#/definitions/AgentCard')!;
      for (const headers of [{}, { 'A2A-Version': '0.3' }] as Record<string, string>[]) {
        const res = await fetch(cardUrl, { headers });
        expect(res.headers.get('vary')).toContain('A2A-Version');
        const legacy = await res.json();
        expect(check(legacy), JSON.stringify(check.errors)).toBe(true);
        expect(legacy).toMatchObject({ protocolVersion: '0.3.0', url: endpoint, preferredTransport: 'JSONRPC', securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } }, security: [{ bearer: [] }] });
        expect(isLegacyAgentCard(legacy)).toBe(true);
        const parsed = parseLegacyAgentCard(legacy);
        expect(parsed.securitySchemes.bearer.scheme).toMatchObject({ $case: 'httpAuthSecurityScheme', value: { scheme: 'bearer' } });
        expect(parsed.skills.map((s) => s.name)).toEqual(skillNames);
        expect(parsed.supportedInterfaces).toContainEqual(expect.objectContaining({ url: endpoint, protocolBinding: 'JSONRPC' }));
      }
    });

    it('message/send becomes a task signal with the same id; tasks/get maps its state', async () => {
      const sent: any = await a.sendMessage(message('build the thing', { signal_type: 'task', to_role: 'Builder', urgency: 0.9 }));
      expect(sent.status.state).toBe(TaskState.TASK_STATE_SUBMITTED);
      const inbox = expectOk(await bob.client.get('/inbox/@bob?type=task')).signals;
      const signal = inbox.find((s: any) => s.id === sent.id);
      expect(signal).toMatchObject({ content: 'build the thing', from_identity: alice.id, to_role: 'Builder', urgency: 0.9, task_status: 'open' });

      expectOk(await bob.client.post('/claim', { signal_id: sent.id }));
      expect((await a.getTask({ tenant: '', id: sent.id } as never)).status?.state).toBe(TaskState.TASK_STATE_WORKING);
      expectOk(await bob.client.post('/ack', { signal_id: sent.id }));
      expect((await a.getTask({ tenant: '', id: sent.id } as never)).status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      await refusedWith(a.getTask({ tenant: '', id: 'no-such-task' } as never), 'SIGNAL_NOT_FOUND');
    });

    it('a message without metadata.signal_type is 400 A2A_SIGNAL_TYPE_REQUIRED', async () => {
      await refusedWith(a.sendMessage(message('no type', {})), 'A2A_SIGNAL_TYPE_REQUIRED');
      const raw = await fetch(url + '/a2a', {
        method: 'POST',
        headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'hi' }] } } }),
      });
      expect(raw.status).toBe(400);
      expect((await raw.json()).error.data.code).toBe('A2A_SIGNAL_TYPE_REQUIRED');
    });

    it('message/stream sends status updates while an agent claims and acks over REST', async () => {
      const events: { id: string; state: TaskState }[] = [];
      const stream = a.sendMessageStream(message('stream me', { signal_type: 'task', to_role: 'Builder' }));
      let taskId: string | undefined;
      const reading = (async () => {
        for await (const ev of stream) {
          events.push(flat(ev));
          taskId ??= flat(ev).id;
        }
      })();
      await waitFor('the task event', async () => taskId, (id) => id !== undefined);
      expectOk(await bob.client.post('/claim', { signal_id: taskId }));
      await waitFor('working', async () => events.length, () => events.some((e) => e.state === TaskState.TASK_STATE_WORKING));
      expectOk(await bob.client.post('/ack', { signal_id: taskId }));
      await reading;
      expect(events.map((e) => e.state)).toEqual([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]);
      expect(events.every((e) => e.id === taskId)).toBe(true);
    });

    it('a stream ends with canceled when the task is cancelled', async () => {
      const events: { id: string; state: TaskState }[] = [];
      let taskId: string | undefined;
      const reading = (async () => {
        for await (const ev of a.sendMessageStream(message('cancel me', { signal_type: 'task', to_role: 'Builder' }))) {
          events.push(flat(ev));
          taskId ??= flat(ev).id;
        }
      })();
      await waitFor('the task event', async () => taskId, (id) => id !== undefined);
      const canceled = await a.cancelTask({ tenant: '', id: taskId!, metadata: {} } as never);
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      await reading;
      expect(events.map((e) => e.state)).toEqual([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_CANCELED]);
    });

    it('a stream ends once its key is revoked, and shows nothing after', async () => {
      const minted = expectOk(await root.client.post('/admin/api-keys', { owner: alice.id }), 201);
      const held = await a2aClient(url, minted.api_key);
      const events: { id: string; state: TaskState }[] = [];
      let taskId: string | undefined;
      const reading = (async () => {
        for await (const ev of held.sendMessageStream(message('revoke me', { signal_type: 'task', to_role: 'Builder' }))) {
          events.push(flat(ev));
          taskId ??= flat(ev).id;
        }
      })();
      await waitFor('the task event', async () => taskId, (id) => id !== undefined);
      expectOk(await root.client.post(`/admin/api-keys/${minted.id}/revoke`));
      await reading;
      expectOk(await bob.client.post('/claim', { signal_id: taskId }));
      expect(events.map((e) => e.state)).toEqual([TaskState.TASK_STATE_SUBMITTED]);
    });

    it('tasks/cancel: canceled by the sender, A2A_CANCEL_FAILED once completed, A2A_TASK_UNAUTHORIZED for another caller', async () => {
      const open: any = await a.sendMessage(message('to cancel', { signal_type: 'task', to_role: 'Builder' }));
      const b = await a2aClient(url, bob.key);
      await refusedWith(b.cancelTask({ tenant: '', id: open.id, metadata: {} } as never), 'A2A_TASK_UNAUTHORIZED');
      const canceled = await a.cancelTask({ tenant: '', id: open.id, metadata: {} } as never);
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      const rest = expectOk(await bob.client.get('/signals/list?type=task')).signals.find((s: any) => s.id === open.id);
      expect(rest).toMatchObject({ task_status: 'cancelled', delivery_state: 'acked' });
      expectError(await bob.client.post('/claim', { signal_id: open.id }), 422, 'SIGNAL_CLAIM_INVALID_STATUS');

      const done: any = await a.sendMessage(message('finish first', { signal_type: 'task', to_role: 'Builder' }));
      expectOk(await bob.client.post('/claim', { signal_id: done.id }));
      expectOk(await bob.client.post('/ack', { signal_id: done.id }));
      await refusedWith(a.cancelTask({ tenant: '', id: done.id, metadata: {} } as never), 'A2A_CANCEL_FAILED');
      const raw = await fetch(url + '/a2a', {
        method: 'POST',
        headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tasks/cancel', params: { id: done.id } }),
      });
      expect(raw.status).toBe(422);
      expect((await raw.json()).error.data.code).toBe('A2A_CANCEL_FAILED');
    });

    it('ListTasks pages the caller own tasks, newest first', async () => {
      const c = await a2aClient(url, carol.key);
      const t1: any = await c.sendMessage(message('one', { signal_type: 'task' }));
      const t2: any = await c.sendMessage(message('two', { signal_type: 'task' }));
      const p1 = await c.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 1, pageToken: '' } as never);
      expect(p1.tasks.map((t) => t.id)).toEqual([t2.id]);
      const p2 = await c.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 5, pageToken: p1.nextPageToken } as never);
      expect(p2.tasks.map((t) => t.id)).toEqual([t1.id]);
      expect(p2.nextPageToken).toBe('');
      expectOk(await root.client.post('/claim', { signal_id: t1.id }));
      const working = await c.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_WORKING, pageSize: 5, pageToken: '' } as never);
      expect(working.tasks.map((t) => t.id)).toEqual([t1.id]);
    });

    it('the v0.3 method names work: message/send and tasks/get', async () => {
      const post = (body: unknown) => fetch(url + '/a2a', { method: 'POST', headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const sent = await post({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'legacy hello' }], metadata: { signal_type: 'task' } } } });
      expect(sent.status).toBe(200);
      const task = (await sent.json()).result;
      expect(task).toMatchObject({ kind: 'task', status: { state: 'submitted' } });
      const got = await post({ jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { id: task.id } });
      expect((await got.json()).result).toMatchObject({ id: task.id, status: { state: 'submitted' } });
    });

    it('POST /a2a refuses no key and a bad key; the card needs none', async () => {
      const none = await fetch(url + '/a2a', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expectError({ status: none.status, body: await none.json() }, 401, 'AUTH_KEY_MISSING');
      const bad = await fetch(url + '/a2a', { method: 'POST', headers: { authorization: 'Bearer svc_not-a-key' }, body: '{}' });
      expectError({ status: bad.status, body: await bad.json() }, 401, 'AUTH_KEY_INVALID');
    });
  });
}
