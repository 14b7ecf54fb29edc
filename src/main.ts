import { ConfigError, readConfig } from './config.js';
import { startService } from './app.js';
import { answeredWriteFailure } from './store/embedded.js';

let config;
try {
  config = readConfig();
} catch (e) {
  if (e instanceof ConfigError) {
    console.error(`config error: ${e.message}`);
    process.exit(1);
  }
  throw e;
}
const service = await startService(config);
// A rejection nobody handled is a bug to log, not a reason to drop every connection of the process.
process.on('unhandledRejection', (err) => {
  if (!answeredWriteFailure(err)) service.log.error({ err }, 'unhandled rejection');
});
let closing = false;
const shutdown = async () => {
  if (closing) return;
  closing = true;
  await service.close();
  process.exit(0);
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
