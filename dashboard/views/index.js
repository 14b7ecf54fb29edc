// The console's views, in nav order (1–9 on the keyboard). One import per line, so branches merge cleanly.
import overview from './overview.js';

export default [
  overview,
];
