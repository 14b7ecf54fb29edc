/** `ps` rows of a process and every process under it, for the watchdogs' reports (test/watchdog.ts). */
const { execFile } = require('node:child_process');

/** Calls back with the rows (pid ppid state elapsed cpu command) of `root` and its descendants (or why ps failed), and their pids. */
function processTree(root, done) {
  execFile('ps', ['-e', '-o', 'pid=,ppid=,stat=,etime=,pcpu=,args='], { timeout: 5000 }, (err, out) => {
    if (err) return done('ps failed: ' + err.message, []);
    const rows = out.split('\n').filter(Boolean).map((l) => l.trim().split(/\s+/));
    const mine = new Set([String(root)]);
    for (let before = 0; before !== mine.size; ) {
      before = mine.size;
      for (const r of rows) if (mine.has(r[1])) mine.add(r[0]);
    }
    const listed = rows.filter((r) => mine.has(r[0]) && r[5] !== 'ps');
    done('pid ppid state elapsed cpu command\n' + listed.map((r) => '    ' + r.join(' ').slice(0, 300)).join('\n'), listed.map((r) => Number(r[0])));
  });
}

/** Kills the processes under `root` that `processTree` listed: they would outlive it, a held worker still spinning. */
function killUnder(root, pids) {
  for (const pid of pids) {
    if (pid === root) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

module.exports = { processTree, killUnder };
