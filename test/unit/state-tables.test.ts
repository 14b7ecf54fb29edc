import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { receiptMachine } from '../../actors/inbox-receipt.js';
import { signalMachine } from '../../actors/signal.js';
import { peerMachine } from '../../actors/peer.js';
import { membershipMachine } from '../../actors/membership.js';
import { deliveryMachine } from '../../actors/webhook-delivery.js';
import { docRows, machineRows } from '../helpers/state-table.js';

const doc = readFileSync(new URL('../../docs/signals.md', import.meta.url), 'utf8');

describe('docs/signals.md state tables equal the machines', () => {
  it('signal machine', () => {
    expect(docRows(doc, '### Signal machine')).toEqual(machineRows(signalMachine));
  });
  it('inbox receipt machine', () => {
    expect(docRows(doc, '### Inbox receipt machine')).toEqual(machineRows(receiptMachine));
  });
  it('peer machine (docs/org.md)', () => {
    expect(docRows(readFileSync(new URL('../../docs/org.md', import.meta.url), 'utf8'), '### Peer machine')).toEqual(machineRows(peerMachine));
  });
  it('membership machine (docs/org.md)', () => {
    expect(docRows(readFileSync(new URL('../../docs/org.md', import.meta.url), 'utf8'), '### Membership machine')).toEqual(machineRows(membershipMachine));
  });
  it('webhook delivery machine (docs/webhooks.md)', () => {
    expect(docRows(readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8'), '### Webhook delivery machine')).toEqual(machineRows(deliveryMachine));
  });
  it('every refusal code in the tables is in the error catalogue', async () => {
    const { catalogue } = await import('../../src/errors.js');
    const codes = [...machineRows(signalMachine), ...machineRows(receiptMachine), ...machineRows(peerMachine), ...machineRows(deliveryMachine)].map((r) => r[5]).filter((c) => c !== '—');
    for (const c of codes) expect(Object.keys(catalogue)).toContain(c);
  });
});
