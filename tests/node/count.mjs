// Drives threadql's count widget (/embed/count.js) in headless Chromium on pages of another
// origin, counting the requests to threadql's /graphql and recording every request to a third
// origin.
//
//   node tests/node/count.mjs '<setup JSON>'
//
// The setup (written by tests/integration/count_widget.rs) names the host pages' origin (`host`)
// and threadql's (`threadql`). The steps: the page `/counts` (many elements, the widget imported
// with a script tag) is loaded and read once every element has its text: each element's text by
// its id, and how many /graphql requests it took; the page `/no-counts` (no element) is loaded
// and its /graphql requests counted; there, an element added later is filled by the exported
// `count()`, and one with a key no discussion can have is left as it was, with one warning. It
// prints one summary line, `COUNTS {...}`, and always exits with 0: the caller reads the summary.

import { existsSync } from 'node:fs';

const CHROMIUM = '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 30_000;
// How long a page is watched after it settled, for requests that should not come.
const QUIET_MS = 500;
const SETUP = 'run ./scripts/install-deps.sh';
// What the host page's elements show before the widget fills them.
const PLACEHOLDER = '…';

// Waits until `probe` (run in the page with `arg`) returns something truthy; returns it.
async function settled(page, what, probe, arg) {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  let last;
  while (Date.now() < deadline) {
    last = await page.evaluate(probe, arg);
    if (last) {
      return last;
    }
    await page.waitForTimeout(50);
  }
  throw new Error(`${what}: not within ${STEP_TIMEOUT_MS} ms (last: ${JSON.stringify(last)})`);
}

async function main() {
  const setupText = process.argv[2];
  if (!setupText) {
    console.error('usage: node tests/node/count.mjs <setup JSON>');
    return;
  }
  if (!existsSync(CHROMIUM)) {
    console.error(`${CHROMIUM} is missing: ${SETUP} (it installs Chromium with apt-get)`);
    return;
  }
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (err) {
    console.error(`cannot load playwright-core (${err.message}): ${SETUP}`);
    return;
  }
  const { host, threadql, laterKey } = JSON.parse(setupText);
  const allowed = new Set([new URL(host).origin, new URL(threadql).origin]);
  const summary = {
    outside: [],
    pageErrors: [],
    consoleErrors: [],
    warnings: [],
    failedRequests: [],
    graphqlErrors: [],
    blockerWorks: false,
    steps: {},
    error: null,
  };
  const steps = summary.steps;
  let graphqlRequests = 0;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
  try {
    const context = await browser.newContext();
    context.on('request', (request) => {
      const url = new URL(request.url());
      if (!allowed.has(url.origin)) {
        summary.outside.push(request.url());
      } else if (url.origin === new URL(threadql).origin && url.pathname === '/graphql' && request.method() === 'POST') {
        graphqlRequests += 1;
      }
    });
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.on('pageerror', (err) => summary.pageErrors.push(String(err?.stack ?? err)));
    page.on('console', (message) => {
      if (message.type() === 'error') {
        summary.consoleErrors.push(message.text());
      } else if (message.type() === 'warning') {
        summary.warnings.push(message.text());
      }
    });
    page.on('requestfailed', (request) => {
      if (!summary.outside.includes(request.url())) {
        summary.failedRequests.push(`${request.url()}: ${request.failure()?.errorText}`);
      }
    });
    page.on('response', async (response) => {
      if (response.status() >= 400) {
        summary.failedRequests.push(`${response.url()}: HTTP ${response.status()}`);
      }
      if (new URL(response.url()).pathname === '/graphql' && response.request().method() === 'POST') {
        try {
          for (const error of (await response.json()).errors ?? []) {
            summary.graphqlErrors.push(`${error.message} (${error.extensions?.code})`);
          }
        } catch {
          // Not JSON: failedRequests has it when the status says so.
        }
      }
    });
    try {
      // The index page: every element filled, in as few requests as the keys need.
      graphqlRequests = 0;
      await page.goto(`${host}/counts`, { waitUntil: 'load' });
      await settled(page, 'every count', (placeholder) =>
        [...document.querySelectorAll('[data-threadql-count]')].every((e) => e.textContent !== placeholder), PLACEHOLDER);
      await page.waitForTimeout(QUIET_MS);
      steps.texts = await page.evaluate(() =>
        Object.fromEntries([...document.querySelectorAll('[data-threadql-count]')].map((e) => [e.id, e.textContent])));
      steps.markup = await page.evaluate(() => document.querySelectorAll('[data-threadql-count] *').length);
      steps.countsRequests = graphqlRequests;

      // A page without any element: no request at all.
      graphqlRequests = 0;
      await page.goto(`${host}/no-counts`, { waitUntil: 'load' });
      await settled(page, 'the widget loaded', () => performance.getEntriesByType('resource').some((e) => e.name.endsWith('/embed/count.js')));
      await page.waitForTimeout(QUIET_MS);
      steps.noCountsRequests = graphqlRequests;

      // An element added later, filled by the exported function; then keys no discussion can
      // have: the server refuses one (an invisible character), the widget never sends the
      // other (a control character); both elements stay as they were, one warning says why.
      graphqlRequests = 0;
      steps.later = await page.evaluate(async ({ src, key }) => {
        const element = document.createElement('span');
        element.dataset.threadqlCount = key;
        element.dataset.threadqlMany = '{n} later';
        element.textContent = 'later';
        document.body.append(element);
        const { count } = await import(src);
        await count(document.body);
        return element.textContent;
      }, { src: `${threadql}/embed/count.js`, key: laterKey });
      steps.laterRequests = graphqlRequests;
      steps.warningsBefore = summary.warnings.length;
      const before = { consoleErrors: summary.consoleErrors.length, failedRequests: summary.failedRequests.length };
      steps.bad = await page.evaluate(async (src) => {
        const box = document.createElement('div');
        box.innerHTML = '<span data-threadql-count="bad&#8203;key">kept</span><span data-threadql-count="bad&#1;key">kept too</span>';
        document.body.append(box);
        const { count } = await import(src);
        await count(box);
        return [...box.children].map((element) => element.textContent);
      }, `${threadql}/embed/count.js`);
      // The browser's own reports of that refusal are the step's, not errors of the run.
      steps.badConsoleErrors = summary.consoleErrors.splice(before.consoleErrors);
      steps.badFailedRequests = summary.failedRequests.splice(before.failedRequests);
    } catch (err) {
      summary.error = String(err?.message ?? err);
    }
    // The blocker itself: a request to a third origin is recorded.
    const recorded = summary.outside.length;
    const consoleErrors = summary.consoleErrors.length;
    await page.evaluate(() => fetch('http://blocked.invalid/probe').catch(() => undefined));
    await page.waitForTimeout(100);
    summary.blockerWorks = summary.outside.length === recorded + 1 && summary.outside[recorded].startsWith('http://blocked.invalid/');
    summary.outside = summary.outside.slice(0, recorded);
    summary.failedRequests = summary.failedRequests.filter((f) => !f.startsWith('http://blocked.invalid/'));
    summary.consoleErrors = summary.consoleErrors.slice(0, consoleErrors);
  } finally {
    await browser.close();
  }
  console.log(`COUNTS ${JSON.stringify(summary)}`);
}

try {
  await main();
} catch (err) {
  console.error(`count widget run failed: ${err?.stack ?? err}`);
}
process.exit(0);
