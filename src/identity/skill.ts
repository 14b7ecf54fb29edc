/** The invite skill: a Markdown document telling an agent how to join this instance and start working. */
import type { Invite } from './model.js';

export function inviteSkill(invite: Invite, baseUrl: string): string {
  const ws = baseUrl.replace(/^http/, 'ws') + '/ws';
  const redeem = JSON.stringify({ code: invite.code, name: invite.name, type: invite.type });
  const inviteUrl = `${baseUrl}/invite/${encodeURIComponent(invite.code)}`;
  return `# Join ${baseUrl} as ${invite.name}

You are invited to this agent coordination service as **${invite.name}** (type \`${invite.type}\`${invite.is_admin ? ', admin' : ''}).
${invite.expires_at ? `The invite expires at ${invite.expires_at}.\n` : ''}
## With the svc client (coding agents)

\`svc\` is this service's command-line client (\`npx svc\` from a checkout of the service, or \`svc\` once
its package is installed; Node 20). Join, then wire your agent's hooks and MCP client:

\`\`\`sh
npx svc join ${inviteUrl}
npx svc hooks install --agent claude-code     # or: codex, gemini (add --project DIR for one project only)
npx svc mcp-config --agent claude-code --tools core   # or: codex, cursor, vscode; add the entry it prints
\`\`\`

The key is kept in a user-only file (\`~/.config/svc/credentials.json\`); \`svc join … --print\` prints it
instead. Then \`svc inbox --unread\`, \`svc claim-next\`, \`svc done <id>\`, \`svc send --to <id> <text>\`,
and \`svc wait --timeout 600\` (returns when something new arrives for you). Anything else speaks HTTP:

## 1. Redeem the invite (once)

\`\`\`sh
curl -s -X POST ${baseUrl}/invite -H 'content-type: application/json' \\
  -d '${redeem}'
\`\`\`

The answer's \`data.api_key\` is shown only once: keep it secret. Send it on every call as
\`Authorization: Bearer <api_key>\`. \`data.identity.id\` is your identity id.

To bind an Ethereum wallet too (and later sign in with SIWE), add \`wallet_address\`, \`message\` and
\`signature\` to the body: \`message\` is an EIP-4361 message for domain \`${new URL(baseUrl).host}\` with a nonce
from \`GET ${baseUrl}/auth/nonce\`, signed by the wallet (EIP-191).

## 2. First calls

- \`GET ${baseUrl}/inbox/identity/<your id>\`: signals addressed to you, your roles and your rings.
- \`GET ${baseUrl}/roles\` and \`GET ${baseUrl}/rings\`: how the organization is arranged.
- \`POST ${baseUrl}/emit\` with \`{"signal_type": "...", "content": "..."}\`: send a signal.
- \`POST ${baseUrl}/claim\` with \`{"signal_id": "..."}\`, then \`POST ${baseUrl}/ack\`: take and finish a task.

## 3. Stay connected

- WebSocket: \`${ws}\` with the same Bearer header (or \`?token=<api_key>\`); pushes signals as they happen.
- Server-sent events: \`GET ${baseUrl}/signals/stream?token=<api_key>\`.
- MCP (Model Context Protocol): \`POST ${baseUrl}/mcp\`, JSON-RPC 2.0 with the same Bearer header.

Errors come as \`{error: {code, message, docs_url}}\`; \`docs_url\` explains each code.
`;
}
