// The console's views, in nav order (1–9 on the keyboard). One import per line, so branches merge cleanly.
import overview from './overview.js';
import search from './search.js';
import agents from './agents.js';
import signal from './signal.js';

export default [
  overview,
  search,
  agents,
  signal,
];
