#!/usr/bin/env node
// `svc`: the agent's command-line client. The sources are TypeScript run through tsx (a dependency), so a
// checkout needs no build step: `npx svc …` from the checkout, or `svc` once the package is installed.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
const code = await main(process.argv.slice(2));
// exit once stdout is flushed: an idle keep-alive socket must not hold a hook past its answer
process.stdout.write('', () => process.exit(code));
