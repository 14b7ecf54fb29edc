/** `svc mcp-config`: the MCP server entry for this service's `/mcp`, with the key in a header, in each client's own format. */
import { usage } from './http.js';

export const MCP_CLIENTS = ['claude-code', 'codex', 'cursor', 'vscode'] as const;

const toml = (s: string) => JSON.stringify(s);

export function mcpConfig(client: string | undefined, url: string, key: string, tools?: string): string {
  const endpoint = `${url}/mcp${tools ? `?tools=${encodeURIComponent(tools)}` : ''}`;
  const headers = { Authorization: `Bearer ${key}` };
  switch (client) {
    // a project's .mcp.json (or `claude mcp add --transport http svc <url> --header "Authorization: Bearer …"`)
    case 'claude-code':
      return JSON.stringify({ mcpServers: { svc: { type: 'http', url: endpoint, headers } } }, null, 2);
    // ~/.codex/config.toml: a streamable HTTP server with static headers
    case 'codex':
      return `[mcp_servers.svc]\nurl = ${toml(endpoint)}\nhttp_headers = { "Authorization" = ${toml(headers.Authorization)} }`;
    // ~/.cursor/mcp.json or a project's .cursor/mcp.json
    case 'cursor':
      return JSON.stringify({ mcpServers: { svc: { url: endpoint, headers } } }, null, 2);
    // .vscode/mcp.json
    case 'vscode':
      return JSON.stringify({ servers: { svc: { type: 'http', url: endpoint, headers } } }, null, 2);
    default:
      throw usage(client ? `unknown client ${client}: ${MCP_CLIENTS.join(', ')}` : `--agent is required: ${MCP_CLIENTS.join(', ')}`, client ? 'VALIDATION_INVALID_TYPE' : 'VALIDATION_FIELD_REQUIRED');
  }
}
