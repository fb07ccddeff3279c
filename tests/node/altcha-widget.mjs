// ALTCHA's own widget (the npm package `altcha`, loaded by a page of another origin from that
// origin, not from a CDN) proves a guest comment with threadql's challenge, in headless Chromium.
//
//   node tests/node/altcha-widget.mjs '<setup JSON>'
//
// The widget is version 3 (package.json pins it): it reads a challenge in the v1 format that
// threadql hands out (`{algorithm, challenge, salt, signature, maxnumber}` from
// `/guest/challenge`, its `challenge` attribute) as v1, solves it, and gives back the v1 payload
// that altcha-lib/v1 makes (base64 of `{algorithm, challenge, number, salt, signature, took}`),
// without any setting for it. The setup (written by tests/integration/guest_embed.rs) names the
// host page's origin (`host`), threadql's (`threadql`), the key and the guest's name and text.
// The page's guest clicks the widget's checkbox; once it says verified, its payload (the form's
// hidden `altcha` field) goes, from the page, as the `proof` of a guest comment. It prints one
// summary line, `ALTCHA {...}`: the widget's state and payload, the post's answer, every outside
// request, page and console error, and `error` (null, or why it stopped early). It always exits
// with 0: the caller reads the summary and decides.

import { existsSync } from 'node:fs';

const CHROMIUM = '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 60_000;

async function until(page, what, probe, arg) {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  let last;
  while (Date.now() < deadline) {
    last = await page.evaluate(probe, arg);
    if (last !== undefined && last !== null && last !== false) {
      return last;
    }
    await page.waitForTimeout(50);
  }
  throw new Error(`${what}: not within ${STEP_TIMEOUT_MS} ms (last: ${JSON.stringify(last)})`);
}

// In the page: creates the discussion if need be and posts a guest comment with `proof`, with no
// token, as the embed would; the answer's data or errors.
async function postWithProof({ threadql, key, name, text, proof }) {
  const run = async (query, variables) => {
    const response = await fetch(`${threadql}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
      credentials: 'omit',
    });
    return response.json();
  };
  const ensured = await run(
    'mutation($i: EnsureDiscussionInput!) { ensureDiscussion(input: $i) { id } }',
    { i: { key, title: document.title, url: window.location.href } },
  );
  if (ensured.errors) {
    return { ensureErrors: ensured.errors };
  }
  return run(
    'mutation($i: PostCommentInput!) { postComment(input: $i) { slug status text author { name guest } } }',
    { i: { discussionId: ensured.data.ensureDiscussion.id, text, guest: { name, proof } } },
  );
}

async function main() {
  const [setupText] = process.argv.slice(2);
  if (!setupText) {
    console.error('usage: node tests/node/altcha-widget.mjs <setup JSON>');
    return;
  }
  if (!existsSync(CHROMIUM)) {
    console.error(`${CHROMIUM} is missing: run ./scripts/install-deps.sh`);
    return;
  }
  const { chromium } = await import('playwright-core');
  const setup = JSON.parse(setupText);
  const { host, threadql } = setup;
  const allowed = new Set([new URL(host).origin, new URL(threadql).origin]);
  const summary = {
    outside: [],
    pageErrors: [],
    consoleErrors: [],
    failedRequests: [],
    graphqlErrors: [],
    dialogs: [],
    blockerWorks: true,
    challengeRequests: 0,
    widget: null,
    payload: null,
    posted: null,
    error: null,
  };
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
  try {
    const context = await browser.newContext();
    context.on('request', (request) => {
      const url = request.url();
      if (url.startsWith('data:') || url.startsWith('blob:') || allowed.has(new URL(url).origin)) {
        summary.challengeRequests += new URL(url).pathname === '/guest/challenge' ? 1 : 0;
      } else {
        summary.outside.push(url);
      }
    });
    const page = await context.newPage();
    page.on('pageerror', (err) => summary.pageErrors.push(String(err?.stack ?? err)));
    page.on('console', (message) => {
      if (message.type() === 'error') {
        summary.consoleErrors.push(`${message.text()} (${message.location().url})`);
      }
    });
    page.on('requestfailed', (request) => summary.failedRequests.push(`${request.url()}: ${request.failure()?.errorText}`));
    page.on('response', (response) => {
      if (response.status() >= 400) {
        summary.failedRequests.push(`${response.url()}: HTTP ${response.status()}`);
      }
    });
    try {
      await page.goto(`${host}/altcha`, { waitUntil: 'load' });
      await until(page, 'the widget', () => customElements.get('altcha-widget') !== undefined);
      // With the keyboard, as its label ("I'm not a robot") asks: the widget's own drawing of
      // the box lies over the input, so a pointer click lands on that.
      await page.locator('altcha-widget').getByRole('checkbox').focus();
      await page.keyboard.press('Space');
      summary.payload = await until(page, 'the widget\'s payload', () =>
        document.querySelector('#form input[name="altcha"]')?.value || null);
      summary.widget = await page.evaluate(() =>
        document.querySelector('altcha-widget [data-state]')?.dataset.state ?? null);
      summary.posted = await page.evaluate(postWithProof, {
        threadql,
        key: setup.key,
        name: setup.name,
        text: setup.text,
        proof: summary.payload,
      });
    } catch (err) {
      summary.error = String(err?.message ?? err);
    }
  } finally {
    await browser.close();
  }
  console.log(`ALTCHA ${JSON.stringify(summary)}`);
}

try {
  await main();
} catch (err) {
  console.error(`altcha widget run failed: ${err?.stack ?? err}`);
}
process.exit(0);
