// How long threadql's proof worker (/embed/proof-worker.js, the one the embed runs) takes to
// solve guests' challenges in headless Chromium, against a running server.
//
//   node tests/node/proof-times.mjs <threadql URL> <count>
//
// The server must take guests (THREADQL_GUESTS=pre or post); its THREADQL_GUEST_POW_MAXNUMBER is
// the cost measured. The page is threadql's own demo page (the worker runs there directly; on
// another origin's page the embed runs the same worker in a frame, which only passes messages).
// Each of `count` challenges comes from the server (`guestChallenge`), one after the other; each
// answer is checked here (SHA-256 of salt and number is the challenge). Times: the wall time from
// sending the challenge to the worker until its answer, and the browser's CPU time over the whole
// run (user + system of its processes, from /proc), divided by the count. Prints one line,
// `PROOF {...}`, and exits with 1 when a challenge went unsolved or wrong.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';

const CHROMIUM = '/usr/bin/chromium';
const TICKS_PER_SECOND = 100;

// The browser's main process: the one whose command line holds `marker`.
function browserPid(marker) {
  const found = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker)) {
        found.push(Number(name));
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return Math.min(...found);
}

// CPU seconds used so far by process `root` and every process under it.
function cpuSeconds(root) {
  const stats = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    try {
      const text = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(name), { parent: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // Gone meanwhile.
    }
  }
  let ticks = 0;
  for (const [pid, stat] of stats) {
    let at = pid;
    let other = stat;
    while (other && at !== root && at > 1) {
      at = other.parent;
      other = stats.get(at);
    }
    if (at === root) {
      ticks += stat.ticks;
    }
  }
  return ticks / TICKS_PER_SECOND;
}

function quantile(sorted, q) {
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return sorted[low] + (sorted[high] - sorted[low]) * (at - low);
}

const round = (x, digits = 1) => Number(x.toFixed(digits));

async function main() {
  const [url, countText] = process.argv.slice(2);
  const count = Number(countText ?? 50);
  if (!url || !(count > 0)) {
    console.error('usage: node tests/node/proof-times.mjs <threadql URL> <count>');
    process.exit(2);
  }
  const { chromium } = await import('playwright-core');
  // A flag of no meaning to Chromium, to find its process by.
  const marker = `--threadql-proof-times=${process.pid}`;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', marker] });
  const root = browserPid(marker);
  const result = { maxnumber: null, count, wallMs: [], numbers: [], loadBefore: round(loadavg()[0], 2) };
  let failed = null;
  try {
    const page = await browser.newPage();
    result.browser = browser.version();
    await page.goto(new URL('/embed/demo', url).href, { waitUntil: 'load' });
    await page.evaluate(() => {
      window.worker = new Worker('/embed/proof-worker.js');
    });
    const cpuBefore = cpuSeconds(root);
    for (let i = 0; i < count; i += 1) {
      const solved = await page.evaluate(async (id) => {
        const response = await fetch('/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ guestChallenge { algorithm challenge salt signature maxnumber } }' }),
        });
        const challenge = (await response.json()).data.guestChallenge;
        const started = performance.now();
        const answer = await new Promise((resolve) => {
          window.worker.onmessage = (event) => resolve(event.data);
          window.worker.postMessage({ id, ...challenge });
        });
        return { challenge, answer, ms: performance.now() - started };
      }, i + 1);
      const { challenge, answer, ms } = solved;
      result.maxnumber = challenge.maxnumber;
      const hashed = createHash('sha256').update(`${challenge.salt}${answer.number}`).digest('hex');
      if (answer.number === null || answer.number === undefined || hashed !== challenge.challenge) {
        failed = `challenge ${i + 1} was not solved: ${JSON.stringify(answer)}`;
        break;
      }
      result.wallMs.push(round(ms));
      result.numbers.push(answer.number);
    }
    result.cpuSecondsPerSolve = round((cpuSeconds(root) - cpuBefore) / Math.max(1, result.wallMs.length), 3);
  } finally {
    await browser.close();
  }
  const sorted = [...result.wallMs].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  result.medianMs = round(quantile(sorted, 0.5));
  result.p90Ms = round(quantile(sorted, 0.9));
  result.meanMs = round(mean);
  result.meanNumber = Math.round(result.numbers.reduce((a, b) => a + b, 0) / Math.max(1, result.numbers.length));
  // What a spam run of 10 000 posts costs its sender, at this machine's speed.
  result.spam10000 = { wallSeconds: round((10_000 * mean) / 1000, 0), cpuSeconds: round(10_000 * result.cpuSecondsPerSolve, 0) };
  result.loadAfter = round(loadavg()[0], 2);
  result.error = failed;
  console.log(`PROOF ${JSON.stringify(result)}`);
  process.exit(failed ? 1 : 0);
}

await main();
