// Drives threadql's reference embed in headless Chromium as a guest would (no token), on pages of
// another origin, with every request to a third origin recorded; then the moderation console's
// guest parts.
//
//   THREADQL_MODERATOR=<moderator's token> node tests/node/guest-embed.mjs '<setup JSON>'
//
// The setup (written by tests/integration/guest_embed.rs) names the host pages' origin (`host`),
// threadql's (`threadql`), the keys of the pages, what the guest types, and where to write the
// screenshot. The steps: the guest page shows a guest's comment box with a honeypot nobody sees;
// the guest types a name, an email, a website and a comment while threadql's worker proves (in a
// frame of threadql's origin), posts, and sees the comment marked as a guest's; edits it through
// the token the page kept; reloads and edits it again; replies (a second proof) and deletes the
// reply; a robot that fills the honeypot is answered as usual; a pre-moderated page tells the
// guest the comment waits for a moderator; the demo page (threadql's own origin, the worker
// without a frame) takes a guest comment too; axe-core checks the guest's box. In the console,
// the held guest comment shows its email, website and network, and the network is banned from
// it and unbanned. It prints one summary line, `GUESTS {...}`: what each step saw, every outside
// request, page error, console error, failed request, GraphQL error and dialog, and `error`
// (null, or why it stopped early). It always exits with 0: the caller reads the summary.

import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 30_000;
const SETUP = 'run ./scripts/install-deps.sh';

// Waits until `probe` (run in the page with `arg`) returns something other than
// undefined/null/false; returns it. `what` names the wait in the error.
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

// Waits until `check` (run here) holds.
async function waitFor(page, what, check) {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`${what}: not within ${STEP_TIMEOUT_MS} ms`);
    }
    await page.waitForTimeout(50);
  }
}

// In the page: the item of the first thread whose body includes `text`, as
// `{ slug, body, author, badge, meta }`, or null.
function threadWith(text) {
  for (const li of document.querySelectorAll('.threadql-threads > li')) {
    const body = li.querySelector(':scope > article > .threadql-body')?.innerText.trim() ?? '';
    if (body.includes(text)) {
      const meta = li.querySelector(':scope > article > .threadql-meta');
      return {
        slug: li.dataset.slug,
        body,
        author: meta?.querySelector('.threadql-author')?.textContent ?? null,
        badge: meta?.querySelector('.threadql-guest-badge')?.textContent ?? null,
        meta: meta?.innerText ?? '',
      };
    }
  }
  return null;
}

// In the page: the widget's form messages (errors and what the guest is told), joined.
function formMessages() {
  const text = [...document.querySelectorAll('.threadql-composer .threadql-error')].map((p) => p.textContent).join(' ');
  return text === '' ? null : text;
}

// In the page: how the honeypot is put, so that nobody sees or reaches it.
function honeypot() {
  const input = document.querySelector('.threadql-composer input[name="subject"]');
  if (!input) {
    return null;
  }
  const box = input.getBoundingClientRect();
  return {
    offScreen: box.right <= 0 || box.bottom <= 0 || box.left >= window.innerWidth,
    ariaHidden: input.closest('[aria-hidden="true"]') !== null,
    tabIndex: input.tabIndex,
    autocomplete: input.getAttribute('autocomplete'),
  };
}

// Runs a GraphQL operation with `token`, from outside the browser; its data.
async function graphqlAs(threadql, token, query, variables) {
  const response = await fetch(new URL('/graphql', threadql), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  if (body.errors) {
    throw new Error(`the operation was refused: ${JSON.stringify(body.errors)}`);
  }
  return body.data;
}

// Runs axe-core on the widget: its violations as `{ id, impact, nodes }`.
async function axeCheck(page, axePath) {
  await page.addScriptTag({ path: axePath });
  return page.evaluate(async () => {
    const results = await window.axe.run(document.querySelector('.threadql'), { resultTypes: ['violations'] });
    return results.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary}`).slice(0, 5),
    }));
  });
}

// Records what a page does that the test forbids: WebSockets elsewhere, page and console
// errors, dialogs, failed requests and GraphQL errors.
function watchPage(p, summary, socketOrigin) {
  p.setDefaultTimeout(STEP_TIMEOUT_MS);
  p.on('websocket', (socket) => {
    if (new URL(socket.url()).origin !== socketOrigin) {
      summary.outside.push(socket.url());
    }
  });
  p.on('pageerror', (err) => summary.pageErrors.push(String(err?.stack ?? err)));
  p.on('console', (message) => {
    if (message.type() === 'error') {
      summary.consoleErrors.push(`${message.text()} (${message.location().url})`);
    }
  });
  p.on('dialog', (dialog) => {
    summary.dialogs.push(dialog.message());
    dialog.dismiss().catch(() => undefined);
  });
  p.on('requestfailed', (request) => {
    if (!summary.outside.includes(request.url())) {
      summary.failedRequests.push(`${request.url()}: ${request.failure()?.errorText}`);
    }
  });
  p.on('response', async (response) => {
    if (response.status() >= 400) {
      summary.failedRequests.push(`${response.url()}: HTTP ${response.status()}`);
    }
    if (new URL(response.url()).pathname === '/graphql' && response.request().method() === 'POST') {
      try {
        const body = await response.json();
        for (const error of body.errors ?? []) {
          summary.graphqlErrors.push(`${p.url()}: ${error.message} (${error.extensions?.code})`);
        }
      } catch {
        // Not JSON: failedRequests has it when the status says so.
      }
    }
  });
  return p;
}

// The guest's first comment on the guest page, its edits after it, a reload, a reply and its
// deletion.
async function asGuest(page, setup, steps, paths) {
  const { host, guest } = setup;
  await page.goto(`${host}/guest`, { waitUntil: 'load' });
  await until(page, 'the guest\'s comment box', () => document.querySelector('.threadql-composer fieldset.threadql-guest') !== null);
  steps.count = await page.locator('.threadql-count').innerText();
  steps.labels = await page.evaluate(() =>
    [...document.querySelectorAll('.threadql-composer label')].filter((l) => !l.closest('[aria-hidden="true"]')).map((l) => l.textContent));
  steps.honeypot = await page.evaluate(honeypot);
  // Tab through the box from the name field: the honeypot is never reached.
  const composer = page.locator('.threadql-composer');
  await composer.getByLabel('Name (shown with your comment)').focus();
  steps.tabOrder = [];
  for (let i = 0; i < 5; i += 1) {
    steps.tabOrder.push(await page.evaluate(() => document.activeElement?.getAttribute('name') ?? document.activeElement?.textContent));
    await page.keyboard.press('Tab');
  }
  await composer.getByLabel('Name (shown with your comment)').fill(guest.name);
  await composer.getByLabel(/^Email/).fill(guest.email);
  await composer.getByLabel(/^Website/).fill(guest.website);
  await composer.getByLabel('Add a comment').fill(guest.text);
  // The worker proves in a frame of threadql's origin while the guest types.
  steps.frame = await until(page, 'the proof frame', () => document.querySelector('iframe.threadql-proof-frame')?.getAttribute('src') ?? null);
  await waitFor(page, 'the proof worker', () => paths.worker);
  const clicked = Date.now();
  await composer.getByRole('button', { name: 'Post comment' }).click();
  const posted = await until(page, 'the guest\'s comment', threadWith, guest.text);
  steps.postMs = Date.now() - clicked;
  steps.posted = posted;
  steps.countAfter = await page.locator('.threadql-count').innerText();
  steps.kept = await page.evaluate(() =>
    Object.keys(window.localStorage).filter((k) => k.startsWith('threadql-guest-token ')).length);
  steps.remembered = await page.evaluate(() => JSON.parse(window.localStorage.getItem('threadql-guest') ?? 'null'));

  // Edit through the kept token: the box holds the text as posted.
  const item = () => page.locator(`li[data-slug="${posted.slug}"] > article`);
  await item().getByRole('button', { name: 'Edit', exact: true }).click();
  const box = item().getByLabel('Edit your comment');
  steps.editBox = await box.inputValue();
  await box.fill(guest.edited);
  await item().getByRole('button', { name: 'Save' }).click();
  steps.edited = await until(page, 'the edit', (text) => {
    const found = threadWith(text);
    return found && found.meta.includes('(edited)') ? found : null;
  }, guest.edited);

  // A reload keeps the edit possible.
  await page.reload({ waitUntil: 'load' });
  await until(page, 'the comment after the reload', threadWith, guest.edited);
  steps.nameAfterReload = await page.locator('.threadql-composer').getByLabel('Name (shown with your comment)').inputValue();
  await item().getByRole('button', { name: 'Edit', exact: true }).click();
  await item().getByLabel('Edit your comment').fill(guest.editedAgain);
  await item().getByLabel('Edit your comment').press('Control+Enter');
  steps.editedAgain = (await until(page, 'the edit after the reload', threadWith, guest.editedAgain)).body;

  // A reply (a second post, so a second challenge), then deleted by its guest.
  await item().getByRole('button', { name: 'Reply' }).click();
  const replyBox = page.locator(`li[data-slug="${posted.slug}"] form.threadql-form`);
  steps.replyName = await replyBox.getByLabel('Name (shown with your comment)').inputValue();
  await replyBox.getByLabel(`Reply to ${guest.name}`).fill(guest.reply);
  await replyBox.getByRole('button', { name: 'Post reply' }).click();
  const reply = page.locator(`li[data-slug="${posted.slug}"] > .threadql-replies > li > article`);
  await until(page, 'the guest\'s reply', (slug) =>
    document.querySelector(`li[data-slug="${CSS.escape(slug)}"] > .threadql-replies .threadql-body`)?.textContent.trim(), posted.slug);
  await reply.getByRole('button', { name: 'Delete', exact: true }).click();
  await reply.getByRole('button', { name: 'Delete for good', exact: true }).click();
  steps.replyDeleted = await until(page, 'the deleted reply', (slug) =>
    document.querySelector(`li[data-slug="${CSS.escape(slug)}"] > .threadql-replies .threadql-tombstone`)?.textContent, posted.slug);
  steps.replyActionsAfter = await reply.getByRole('button').allInnerTexts();
  return posted.slug;
}

// A robot fills every field, the honeypot too: it is answered as a guest is.
async function asRobot(page, setup, steps) {
  const { host, guest } = setup;
  await page.goto(`${host}/guest`, { waitUntil: 'load' });
  await until(page, 'the robot\'s comment box', () => document.querySelector('.threadql-composer input[name="subject"]') !== null);
  const composer = page.locator('.threadql-composer');
  await composer.getByLabel('Name (shown with your comment)').fill('Robot');
  await page.evaluate(() => {
    document.querySelector('.threadql-composer input[name="subject"]').value = 'cheap pills';
  });
  await composer.getByLabel('Add a comment').fill(guest.robot);
  await composer.getByRole('button', { name: 'Post comment' }).click();
  steps.robot = await until(page, 'the robot\'s answer', (text) => threadWith(text)?.body ?? formMessages(), guest.robot);
}

// A page whose discussion holds guests' comments for a moderator.
async function held(page, setup, steps) {
  const { host, guest } = setup;
  await page.goto(`${host}/held`, { waitUntil: 'load' });
  await until(page, 'the held page\'s box', () => document.querySelector('.threadql-composer fieldset.threadql-guest') !== null);
  steps.heldHint = await page.locator('.threadql-composer .threadql-hint').allInnerTexts();
  const composer = page.locator('.threadql-composer');
  await composer.getByLabel('Name (shown with your comment)').fill(guest.name);
  await composer.getByLabel(/^Email/).fill(guest.email);
  await composer.getByLabel('Add a comment').fill(guest.held);
  await composer.getByRole('button', { name: 'Post comment' }).click();
  steps.heldTold = await until(page, 'what the guest is told', formMessages);
  steps.heldShown = await page.locator('.threadql-threads > li').count();
}

// The demo page, on threadql's own origin: its worker runs without a frame.
async function demo(page, setup, steps, paths) {
  const { threadql, guest } = setup;
  const before = paths.frames;
  await page.goto(`${threadql}/embed/demo?key=${encodeURIComponent(setup.demoKey)}`, { waitUntil: 'load' });
  await until(page, 'the demo\'s guest box', () => document.querySelector('.threadql-composer fieldset.threadql-guest') !== null);
  const composer = page.locator('.threadql-composer');
  await composer.getByLabel('Name (shown with your comment)').fill(guest.name);
  await composer.getByLabel('Add a comment').fill(guest.demo);
  await composer.getByRole('button', { name: 'Post comment' }).click();
  steps.demo = await until(page, 'the demo\'s guest comment', threadWith, guest.demo);
  steps.demoFrames = await page.locator('iframe').count();
  steps.demoFrameRequests = paths.frames - before;
}

// The console: the held guest comment with what the guest gave, its network banned from the
// comment's "Ban network…" and unbanned.
async function consoleSteps(page, setup, moderator, steps) {
  const { threadql, guest } = setup;
  await page.goto(`${threadql}/admin#token=${moderator}`, { waitUntil: 'load' });
  const details = await until(page, 'the guest comment in the queue', () => {
    const dl = document.querySelector('#queue-items .guest-details');
    return dl ? [...dl.querySelectorAll('dd')].map((dd) => dd.innerText.replace('Ban network…', '').trim()) : null;
  });
  steps.console = { details };
  steps.console.badge = await page.locator('#queue-items .badge.guest').first().innerText();
  await page.getByRole('button', { name: 'Ban network…' }).first().click();
  steps.console.prefilled = await until(page, 'the network form', () => {
    const input = document.getElementById('network-cidr');
    return !document.getElementById('view-bans').hidden && input.value !== '' ? input.value : null;
  });
  await page.locator('#network-ban-form').getByLabel('Reason', { exact: true }).fill(guest.banReason);
  await page.getByRole('button', { name: 'Ban network', exact: true }).click();
  steps.console.banned = await until(page, 'the banned network', () => {
    const rows = [...document.querySelectorAll('#network-bans-rows > tr')];
    return rows.length > 0 ? rows.map((r) => [...r.cells].slice(0, 3).map((c) => c.innerText)) : null;
  });
  await page.getByRole('button', { name: /^Unban the network/ }).click();
  steps.console.unbanned = await until(page, 'the unban', () =>
    (document.querySelectorAll('#network-bans-rows > tr').length === 0 && !document.getElementById('network-bans-empty').hidden
      ? document.getElementById('network-bans-empty').textContent
      : null));
  steps.console.left = (await graphqlAs(threadql, moderator, 'query { networkBans { cidr } }', {})).networkBans;
}

async function main() {
  const [setupText] = process.argv.slice(2);
  const moderator = process.env.THREADQL_MODERATOR;
  if (!setupText || !moderator) {
    console.error('usage: THREADQL_MODERATOR=… node tests/node/guest-embed.mjs <setup JSON>');
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
  const setup = JSON.parse(setupText);
  const { host, threadql, screenshot } = setup;
  const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
  const allowed = new Set([new URL(host).origin, new URL(threadql).origin]);
  const socketOrigin = new URL(threadql).origin.replace(/^http/, 'ws');
  const summary = {
    outside: [],
    pageErrors: [],
    consoleErrors: [],
    failedRequests: [],
    graphqlErrors: [],
    dialogs: [],
    requests: 0,
    blockerWorks: false,
    steps: {},
    screenshot: null,
    ms: 0,
    error: null,
  };
  const steps = summary.steps;
  // The requests for the proof's frame and worker, as the browser made them.
  const paths = { frames: 0, worker: false };
  const started = Date.now();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
  try {
    const context = await browser.newContext({ viewport: { width: 900, height: 1300 } });
    await context.addInitScript(`${threadWith}\n${formMessages}\n${honeypot}\nwindow.threadWith = threadWith;\nwindow.formMessages = formMessages;\nwindow.honeypot = honeypot;`);
    context.on('request', (request) => {
      const url = request.url();
      if (url.startsWith('data:') || url.startsWith('blob:') || allowed.has(new URL(url).origin)) {
        summary.requests += 1;
        const path = new URL(url).pathname;
        paths.frames += path === '/embed/proof' ? 1 : 0;
        paths.worker ||= path === '/embed/proof-worker.js';
      } else {
        summary.outside.push(url);
      }
    });
    const page = watchPage(await context.newPage(), summary, socketOrigin);
    try {
      steps.slug = await asGuest(page, setup, steps, paths);
      steps.frameRequests = paths.frames;
      steps.axe = await axeCheck(page, axePath);
      await asRobot(page, setup, steps);
      await held(page, setup, steps);
      await demo(page, setup, steps, paths);
      await consoleSteps(page, setup, moderator, steps);
    } catch (err) {
      summary.error = String(err?.message ?? err);
      try {
        mkdirSync(dirname(screenshot), { recursive: true });
        await page.screenshot({ path: screenshot, fullPage: true });
        summary.screenshot = screenshot;
        console.log(`SCREENSHOT ${screenshot} (at the failure)`);
      } catch {
        // The failure is reported either way.
      }
    }
    // The blocker itself: a request to a third origin is recorded.
    const recorded = summary.outside.length;
    const probe = await context.newPage();
    await probe.evaluate(() => fetch('http://blocked.invalid/probe').catch(() => undefined));
    await probe.close();
    summary.blockerWorks =
      summary.outside.length === recorded + 1 && summary.outside[recorded].startsWith('http://blocked.invalid/');
    summary.outside = summary.outside.slice(0, recorded);
  } finally {
    await browser.close();
  }
  summary.ms = Date.now() - started;
  console.log(`GUESTS ${JSON.stringify(summary)}`);
}

try {
  await main();
} catch (err) {
  console.error(`guest embed run failed: ${err?.stack ?? err}`);
}
process.exit(0);
