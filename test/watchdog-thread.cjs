/**
 * The watchdog thread of test/watchdog.ts: once the file has run workerData.limitS seconds, it says so, prints
 * what the main thread runs (a second of CPU samples, then its stack, both through the inspector) and the
 * processes under the worker, and kills them and the worker.
 */
const { workerData } = require('node:worker_threads');
const { Session } = require('node:inspector');
const { processTree, killUnder } = require('./process-tree.cjs');
const { writeSync } = require('node:fs');

const say = (s) => writeSync(2, s + '\n');
const where = (f) => (f.functionName || '<anonymous>') + ' (' + f.url + ':' + ((f.lineNumber ?? f.location.lineNumber) + 1) + ')';

let ended = false;
function end() {
  if (ended) return;
  ended = true;
  processTree(process.pid, (text, pids) => {
    say('[watchdog] its processes: ' + text);
    killUnder(process.pid, pids);
    process.kill(process.pid, 'SIGKILL');
  });
}

async function mainThread(session) {
  const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));
  // a second of samples names what a loop that never yields keeps running; the pause then shows where it is
  await post('Profiler.enable');
  await post('Profiler.start');
  await new Promise((r) => setTimeout(r, 1000));
  const { profile } = await post('Profiler.stop');
  const hot = profile.nodes.filter((n) => n.hitCount).sort((x, y) => y.hitCount - x.hitCount).slice(0, 12);
  say('[watchdog] main thread, samples of one second:\n' + hot.map((n) => '    ' + String(n.hitCount).padStart(5) + '  ' + where(n.callFrame)).join('\n'));
  const paused = new Promise((r) => session.once('Debugger.paused', ({ params }) => r(params)));
  await post('Debugger.enable');
  await post('Debugger.pause');
  say('[watchdog] main thread stack:\n' + (await paused).callFrames.map((f) => '    at ' + where(f)).join('\n'));
}

setTimeout(() => {
  say('\n[watchdog] ' + workerData.file + ' still running after ' + workerData.limitS + ' s: stopping its worker (pid ' + process.pid + ')');
  const session = new Session();
  session.connectToMainThread();
  const blocked = setTimeout(() => {
    say('[watchdog] the main thread does not answer the inspector: it waits in native code (a synchronous call)');
    end();
  }, 5000);
  mainThread(session)
    .catch((err) => say('[watchdog] inspector: ' + err.message))
    .finally(() => {
      clearTimeout(blocked);
      end();
    });
}, workerData.limitS * 1000);
