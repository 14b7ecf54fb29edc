// The console's views, in nav order (1–9 on the keyboard). One import per line, so branches merge cleanly.
import overview from './overview.js';
import search from './search.js';
import agents from './agents.js';
import signal from './signal.js';
import memory from './memory.js';
import workspace from './workspace.js';
import artifacts from './artifacts.js';
import integrations from './integrations.js';
import audit from './audit.js';

export default [
  overview,
  search,
  agents,
  signal,
  memory,
  workspace,
  artifacts,
  integrations,
  audit,
];
