// Drives threadql's moderation console (/admin) in headless Chromium as a moderator would, with
// the embed open on a page of another origin, every request to a third origin recorded.
//
//   THREADQL_MODERATOR=… THREADQL_OTHER_MODERATOR=… THREADQL_READER=… THREADQL_POSTER=… \
//     node tests/node/admin.mjs '<setup JSON>'
//
// The setup (written by tests/integration/admin.rs) names the host page's origin (`host`),
// threadql's (`threadql`), the seeded discussion (`discussion`, `key`), the keys of its held
// comments as the console lists them (`<discussion>/<slug>`), the reasons to type, and where to
// write the screenshot. The steps: a reader's token is refused; the moderator signs in by
// fragment, approves with `a`, rejects with `r` and a reason, bans from the history drawer,
// hears a comment held meanwhile and another moderator's approval, approves five at once, and
// reads the rejected tab, the keys, the discussions, bans and log views; then axe-core checks
// every view. It prints one summary line, `ADMIN {...}`: what each step saw, axe-core's
// violations per view, every outside request, page error, console error, failed request,
// GraphQL error and dialog, and `error` (null, or why it stopped early). It always exits with
// 0: the caller reads the summary and decides. When it cannot run at all it prints no summary
// line and explains why on stderr.

import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 30_000;
const SETUP = 'run ./scripts/install-deps.sh';
// The views the console shows besides the sign-in form.
const PARTS = ['sign-in', 'views', 'session', 'view-queue', 'view-discussions', 'view-bans', 'view-log'];

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

// In the page: the keys of the queue's items, in order.
function itemKeys() {
  return [...document.querySelectorAll('#queue-items > li')].map((li) => li.dataset.key);
}

// In the page: the key of the item holding the focus, else the focused element's id.
function focusedKey() {
  const active = document.activeElement;
  return active?.closest('#queue-items > li')?.dataset.key ?? (active?.id || active?.tagName || null);
}

// In the page: what the live region said last.
function announced() {
  return document.getElementById('announcer').textContent;
}

// How many live subscriptions the server has in place (its /metrics says so).
async function liveSubscribers(threadql) {
  const metrics = await (await fetch(new URL('/metrics', threadql))).text();
  const line = metrics.split('\n').find((l) => l.startsWith('threadql_live_subscribers '));
  return line ? Number(line.split(' ')[1]) : 0;
}

async function waitForSubscribers(threadql, page, n) {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while ((await liveSubscribers(threadql)) < n) {
    if (Date.now() > deadline) {
      throw new Error(`${n} live subscriptions never reached the server`);
    }
    await page.waitForTimeout(50);
  }
}

// Runs a GraphQL operation as another client, over HTTP from outside the browser; its data.
async function graphqlAs(threadql, token, query, variables) {
  const response = await fetch(new URL('/graphql', threadql), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  if (body.errors) {
    throw new Error(`another client's operation was refused: ${JSON.stringify(body.errors)}`);
  }
  return body.data;
}

// Runs axe-core on the page as it is: records the violations it finds, as `{ id, impact,
// nodes }`, under `view` in `summary.axe`, and how many rules applied in `summary.axeRules`.
async function axeCheck(page, summary, view) {
  const { violations, rules } = await page.evaluate(async () => {
    const results = await window.axe.run(document, { resultTypes: ['violations'] });
    return {
      rules: results.passes.length + results.violations.length,
      violations: results.violations.map((v) => ({
        id: v.id,
        impact: v.impact,
        nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary}`).slice(0, 5),
      })),
    };
  });
  summary.axe[view] = violations;
  summary.axeRules[view] = rules;
}

// Records every request of `context` (its pages and workers) to a third origin.
function watchContext(context, summary, allowed) {
  context.on('request', (request) => {
    const url = request.url();
    if (url.startsWith('data:') || url.startsWith('blob:') || allowed.has(new URL(url).origin)) {
      summary.requests += 1;
    } else {
      summary.outside.push(url);
    }
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

// A new page of `context`, watched.
async function openPage(context, summary, setup) {
  return watchPage(await context.newPage(), summary, new URL(setup.threadql).origin.replace(/^http/, 'ws'));
}

async function checkXss(page, summary) {
  summary.xss ??= await page.evaluate(() => window.__threadqlXss ?? null);
}

// The steps of the moderator's session, in the context whose pages run under the console's own
// policy.
async function moderate(context, setup, tokens, steps, summary) {
  const { host, threadql, discussion, key, keys, texts, reasons, ids, screenshot } = setup;

  // 1. A reader's token: the refusal alone, and the token is not kept.
  const readerPage = await openPage(context, summary, setup);
  await readerPage.goto(`${threadql}/admin#token=${tokens.reader}`, { waitUntil: 'load' });
  const message = await until(readerPage, 'the refusal', () => document.getElementById('sign-in-message').textContent || null);
  steps.reader = await readerPage.evaluate((parts) => ({
    url: window.location.href,
    shown: parts.filter((id) => !document.getElementById(id).hidden),
    items: document.querySelectorAll('#queue-items > li').length,
    stored: window.sessionStorage.getItem('threadql-admin-token'),
  }), PARTS);
  steps.reader = { message, ...steps.reader };
  await checkXss(readerPage, summary);
  await readerPage.close();

  // 2. The embed, on the host page of another origin, following the discussion live.
  const embedPage = await openPage(context, summary, setup);
  const before = await liveSubscribers(threadql);
  await embedPage.goto(`${host}/article`, { waitUntil: 'load' });
  await until(embedPage, 'the embed following live', () =>
    document.querySelector('.threadql')?.getAttribute('data-live') === 'live');
  await waitForSubscribers(threadql, embedPage, before + 2);

  // 3. The moderator signs in by fragment: the token leaves the address bar at once.
  const page = await openPage(context, summary, setup);
  await page.goto(`${threadql}/admin#token=${tokens.moderator}`, { waitUntil: 'load' });
  await until(page, 'the queue', (n) => document.querySelectorAll('#queue-items > li').length === n, 11);
  await until(page, 'the tab counts', () => document.getElementById('count-PENDING').textContent === '11');
  steps.signIn = await page.evaluate((token) => ({
    url: window.location.href,
    stored: window.sessionStorage.getItem('threadql-admin-token') === token,
    who: document.getElementById('who-name').textContent,
  }), tokens.moderator);
  await until(page, 'the live queue', () => document.body.dataset.live === 'live');
  await waitForSubscribers(threadql, page, before + 3);
  steps.queue = await page.evaluate((hostile) => ({
    keys: itemKeys(),
    tabs: [...document.querySelectorAll('[role=tab]')].map((t) => t.textContent.replace(/\s+/g, ' ').trim()),
    titles: [...document.querySelectorAll('#queue-items > li .meta a')].map((a) => a.textContent),
    authors: [...document.querySelectorAll('#queue-items > li h3 .author')].map((a) => a.textContent),
    context: document.querySelector('#queue-items .context')?.innerText.trim(),
    hostile: hostile.map((k) => document.querySelector(`#queue-items > li[data-key="${k}"] .body`)?.innerText.trim()),
    dangerous: document.querySelectorAll(
      'main script, main img, main svg, main iframe, main style, main [onerror], main [onclick], main [onload], main [onmouseover], main a[href^="javascript"]',
    ).length,
    bold: document.querySelector('#queue-items > li .body strong')?.textContent,
  }), keys.hostile);
  mkdirSync(dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot });
  summary.screenshot = screenshot;

  // 4. `j` then `a`: the first comment approved; focus on the next; the embed shows it live.
  await page.keyboard.press('j');
  const focused = await page.evaluate(focusedKey);
  await page.keyboard.press('a');
  await until(page, 'the approved comment gone', (k) => !itemKeys().includes(k), keys.approved);
  steps.approve = {
    focused,
    announced: await until(page, 'the approval announced', () => announced().startsWith('Approved') && announced()),
    focusAfter: await page.evaluate(focusedKey),
  };
  steps.embed = await until(embedPage, 'the approved comment in the embed', (text) => {
    const bodies = [...document.querySelectorAll('.threadql-threads > li > article .threadql-body')].map((b) => b.innerText.trim());
    return bodies.includes(text) ? bodies : null;
  }, texts.approved);
  await checkXss(embedPage, summary);

  // 5. `r`: the dialog asks the reason; Enter rejects.
  await page.keyboard.press('r');
  const dialogFocus = await until(page, 'the reject dialog', () =>
    document.getElementById('reject-dialog').open && document.activeElement?.id);
  await page.keyboard.type(reasons.reject);
  await page.keyboard.press('Enter');
  await until(page, 'the rejected comment gone', (k) => !itemKeys().includes(k), keys.rejected);
  steps.reject = {
    dialogFocus,
    announced: await until(page, 'the rejection announced', () => announced().startsWith('Rejected') && announced()),
    focusAfter: await page.evaluate(focusedKey),
  };

  // 6. Keys typed in a field do nothing; then `h` opens the author's history, banned from there.
  await page.focus('#queue-filter-input');
  await page.keyboard.type('ja');
  await page.waitForTimeout(300);
  steps.typing = await page.evaluate(() => ({
    value: document.getElementById('queue-filter-input').value,
    items: itemKeys().length,
    focus: document.activeElement?.id,
  }));
  await page.fill('#queue-filter-input', '');
  await page.locator(`#queue-items > li[data-key="${keys.banned}"] > article`).focus();
  await page.keyboard.press('h');
  await until(page, 'the history', () =>
    document.getElementById('history').open &&
    document.querySelectorAll('#standing-counts dd').length === 4 &&
    document.querySelectorAll('#history-items > li').length > 0);
  steps.history = await page.evaluate(() => ({
    title: document.getElementById('history-title').textContent,
    before: document.getElementById('standing-ban').textContent,
    items: [...document.querySelectorAll('#history-items > li')].map((li) => li.innerText.trim()),
  }));
  await page.click('#history-ban');
  await until(page, 'the ban dialog', () => document.getElementById('ban-dialog').open);
  await page.selectOption('#ban-duration', '7');
  await page.fill('#ban-reason', reasons.ban);
  await page.click('#ban-form button[value="ok"]');
  steps.history.after = await until(page, 'the ban shown', () => {
    const text = document.getElementById('standing-ban').textContent;
    return text.startsWith('Banned') ? text : null;
  });
  steps.history.announced = await until(page, 'the ban announced', () => announced().startsWith('Banned') && announced());
  await page.keyboard.press('Escape');
  await until(page, 'the history closed', () => !document.getElementById('history').open);
  steps.history.focusAfter = await page.evaluate(focusedKey);

  // 7. Live: a comment held by another client arrives; another moderator's approval removes one.
  // How long each took is reported (the 2 s target is a measure, not a test condition).
  let sent = Date.now();
  const posted = await graphqlAs(threadql, tokens.poster,
    'mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug status } }',
    { d: discussion, t: texts.late });
  const lateKey = `${discussion}/${posted.postComment.slug}`;
  steps.live = { slug: posted.postComment.slug, status: posted.postComment.status };
  steps.live.keys = await until(page, 'the held comment live in the queue', (k) => itemKeys().includes(k) && itemKeys(), lateKey);
  steps.live.arrivedMs = Date.now() - sent;
  sent = Date.now();
  const [, removedSlug] = keys.hostile[0].split(/\/(.*)/s);
  await graphqlAs(threadql, tokens.otherModerator,
    'mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { status } }',
    { d: discussion, s: removedSlug });
  steps.live.afterRemoval = await until(page, 'the other approval live', (k) => !itemKeys().includes(k) && itemKeys(), keys.hostile[0]);
  steps.live.leftMs = Date.now() - sent;
  steps.live.removed = keys.hostile[0];
  await until(page, 'the counts after the live changes', () => document.getElementById('count-PENDING').textContent === '9');

  // 8. Five approved at once.
  for (const k of keys.bulk) {
    await page.locator(`#queue-items > li[data-key="${k}"] input[type="checkbox"]`).check();
  }
  const button = await page.locator('#bulk-approve').innerText();
  await page.click('#bulk-approve');
  const bulkAnnounced = await until(page, 'the bulk approval announced', () => announced().startsWith('Approved') && announced().includes('selected') && announced());
  steps.bulk = { button, announced: bulkAnnounced, left: await page.evaluate(itemKeys) };
  await checkXss(page, summary);

  // 9. The rejected tab, with the reason given.
  await page.click('#tab-REJECTED');
  steps.rejectedTab = await until(page, 'the rejected tab', (k) => {
    const shown = itemKeys();
    return shown.includes(k) && {
      keys: shown,
      reason: document.querySelector(`#queue-items > li[data-key="${k}"] .reason`)?.textContent,
    };
  }, keys.rejected);

  // 9b. The reported tab, with the report's reason and note (the time aside).
  await page.click('#tab-REPORTED');
  steps.reportedTab = await until(page, 'the reported tab', (k) => {
    const shown = itemKeys();
    const reports = [...document.querySelectorAll(`#queue-items > li[data-key="${k}"] .reports > li`)]
      .map((li) => li.textContent.replace(/ \(.*\)$/s, ''));
    return shown.includes(k) && reports.length > 0 && { keys: shown, reports };
  }, keys.reported);
  await page.click('#tab-PENDING');
  await until(page, 'the pending tab again', () => document.getElementById('tab-PENDING').getAttribute('aria-selected') === 'true');

  // 10. `?` lists the keys; Escape closes the list.
  await page.locator('#queue-items > li > article').first().focus();
  await page.keyboard.press('?');
  const open = await until(page, 'the keys dialog', () => document.getElementById('keys-dialog').open);
  await page.keyboard.press('Escape');
  const closed = await until(page, 'the keys dialog closed', () => !document.getElementById('keys-dialog').open);
  steps.keysDialog = { open, closed };

  // 11. The discussions, bans and log views.
  steps.views = {};
  await page.getByRole('button', { name: 'Discussions', exact: true }).click();
  await page.getByLabel('Discussion id or key').fill(key);
  await page.getByRole('button', { name: 'Find', exact: true }).click();
  steps.views.discussion = await until(page, 'the discussion', () => {
    const card = document.getElementById('discussion-card');
    if (card.hidden) {
      return null;
    }
    const fields = Object.fromEntries([...card.querySelectorAll('dl.fields dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]));
    return { title: card.querySelector('h3').textContent, moderation: fields.Moderation, layout: fields.Layout };
  });
  await page.getByRole('button', { name: 'Bans', exact: true }).click();
  steps.views.bans = await until(page, 'the bans', () => {
    const rows = [...document.querySelectorAll('#bans-rows > tr')];
    return rows.length > 0 && rows.map((row) => row.cells[0].textContent);
  });
  await page.getByRole('button', { name: 'Log', exact: true }).click();
  await until(page, 'the log', () => document.querySelectorAll('#log-rows > tr').length > 0);
  await page.selectOption('#log-action', 'BAN');
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  steps.views.logBans = await until(page, 'the bans logged', () => {
    const rows = [...document.querySelectorAll('#log-rows > tr')].map((row) => [row.cells[2].textContent, row.cells[5].textContent]);
    return rows.every(([action]) => action === 'BAN') && rows.length > 0 && rows;
  });
  await page.selectOption('#log-action', '');
  await page.fill('#log-moderator', ids.second);
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  steps.views.logSecond = await until(page, 'the second moderator\'s entries', () => {
    const rows = [...document.querySelectorAll('#log-rows > tr')].map((row) => [row.cells[2].textContent, row.cells[1].textContent]);
    return rows.length > 0 && rows.every(([action]) => action !== 'BAN') && rows;
  });
  await checkXss(page, summary);
  await page.close();
  await embedPage.close();

  // 12. Signing in by pasting: an expired token is told why (its refusal is the one GraphQL
  // error this run expects), a moderator's token gets in, and signing out forgets it.
  const pastePage = await openPage(context, summary, setup);
  await pastePage.goto(`${threadql}/admin`, { waitUntil: 'load' });
  const errorsBefore = summary.graphqlErrors.length;
  await pastePage.fill('#token', tokens.expired);
  await pastePage.click('#sign-in-form button[type=submit]');
  const expired = await until(pastePage, 'the expired token refused', () => {
    const message = document.getElementById('sign-in-message').textContent;
    return message.startsWith('This token was refused') && message;
  });
  // The refusal is recorded once its answer has been read (after the page showed it).
  for (const deadline = Date.now() + STEP_TIMEOUT_MS; summary.graphqlErrors.length === errorsBefore && Date.now() < deadline;) {
    await pastePage.waitForTimeout(20);
  }
  const refusals = summary.graphqlErrors.splice(errorsBefore).map((e) => e.slice(e.lastIndexOf('(')));
  await pastePage.fill('#token', tokens.moderator);
  await pastePage.click('#sign-in-form button[type=submit]');
  const who = await until(pastePage, 'the pasted sign-in', () => !document.getElementById('session').hidden && document.getElementById('who-name').textContent);
  // Signing out reloads the page: first let the session's reads finish (an aborted one would
  // count as a failed request).
  await until(pastePage, 'the pasted session live', () => document.body.dataset.live === 'live'
    && document.getElementById('count-PENDING').textContent === '4'
    && document.querySelectorAll('#queue-items > li').length === 4);
  await pastePage.click('#sign-out');
  const signedOut = await until(pastePage, 'the sign-out', () => !document.getElementById('sign-in').hidden && document.getElementById('sign-in-message').textContent);
  steps.pasted = {
    expired,
    refusals,
    who,
    signedOut,
    stored: await pastePage.evaluate(() => window.sessionStorage.getItem('threadql-admin-token')),
  };
  await pastePage.close();
}

// axe-core on every view, in a context of its own created with `bypassCSP: true`: the console's
// policy refuses any script it did not load itself, so `addScriptTag` works only there; the
// steps above run under the policy, so this bypass hides nothing they check.
async function audit(context, setup, tokens, summary) {
  const { threadql, key } = setup;
  const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
  const page = await openPage(context, summary, setup);
  await page.goto(`${threadql}/admin#token=${tokens.moderator}`, { waitUntil: 'load' });
  await until(page, 'the queue to audit', () => document.querySelectorAll('#queue-items > li').length > 0);
  await page.addScriptTag({ path: axePath });
  await axeCheck(page, summary, 'queue');
  await page.locator('#queue-items > li > article').first().focus();
  await page.keyboard.press('h');
  await until(page, 'the history to audit', () =>
    document.querySelectorAll('#standing-counts dd').length === 4 &&
    document.querySelectorAll('#history-items > li').length > 0);
  await axeCheck(page, summary, 'history');
  await page.keyboard.press('Escape');
  await page.getByRole('button', { name: 'Discussions', exact: true }).click();
  await page.getByLabel('Discussion id or key').fill(key);
  await page.getByRole('button', { name: 'Find', exact: true }).click();
  await until(page, 'the discussion to audit', () => !document.getElementById('discussion-card').hidden);
  await axeCheck(page, summary, 'discussions');
  await page.getByRole('button', { name: 'Bans', exact: true }).click();
  await until(page, 'the bans to audit', () => document.querySelectorAll('#bans-rows > tr').length > 0);
  await axeCheck(page, summary, 'bans');
  await page.getByRole('button', { name: 'Log', exact: true }).click();
  await until(page, 'the log to audit', () => document.querySelectorAll('#log-rows > tr').length > 0);
  await axeCheck(page, summary, 'log');
  await page.close();
}

async function main() {
  const [setupText] = process.argv.slice(2);
  const tokens = {
    moderator: process.env.THREADQL_MODERATOR,
    otherModerator: process.env.THREADQL_OTHER_MODERATOR,
    reader: process.env.THREADQL_READER,
    poster: process.env.THREADQL_POSTER,
    expired: process.env.THREADQL_EXPIRED,
  };
  if (!setupText || Object.values(tokens).some((t) => !t)) {
    console.error('usage: THREADQL_MODERATOR=… THREADQL_OTHER_MODERATOR=… THREADQL_READER=… THREADQL_POSTER=… THREADQL_EXPIRED=… node tests/node/admin.mjs <setup JSON>');
    return;
  }
  if (!existsSync(CHROMIUM)) {
    console.error(`${CHROMIUM} is missing: ${SETUP} (it installs Chromium with apt-get)`);
    return;
  }
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
    createRequire(import.meta.url).resolve('axe-core/axe.min.js');
  } catch (err) {
    console.error(`cannot load playwright-core or axe-core (${err.message}): ${SETUP}`);
    return;
  }
  const setup = JSON.parse(setupText);
  const allowed = new Set([new URL(setup.host).origin, new URL(setup.threadql).origin]);

  const summary = {
    outside: [],
    pageErrors: [],
    consoleErrors: [],
    failedRequests: [],
    graphqlErrors: [],
    dialogs: [],
    requests: 0,
    blockerWorks: false,
    xss: null,
    steps: {},
    axe: {},
    axeRules: {},
    screenshot: null,
    ms: 0,
    error: null,
  };
  const started = Date.now();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 1400 } });
    watchContext(context, summary, allowed);
    await context.addInitScript(`${itemKeys}\n${focusedKey}\n${announced}\nwindow.itemKeys = itemKeys;\nwindow.focusedKey = focusedKey;\nwindow.announced = announced;`);
    const auditContext = await browser.newContext({ viewport: { width: 1100, height: 1400 }, bypassCSP: true });
    watchContext(auditContext, summary, allowed);
    try {
      await moderate(context, setup, tokens, summary.steps, summary);
      await audit(auditContext, setup, tokens, summary);
    } catch (err) {
      summary.error = String(err?.message ?? err);
      const open = [...context.pages(), ...auditContext.pages()].find((p) => p.url().includes('/admin'));
      try {
        mkdirSync(dirname(setup.screenshot), { recursive: true });
        await open?.screenshot({ path: setup.screenshot });
        summary.screenshot = setup.screenshot;
        console.log(`SCREENSHOT ${setup.screenshot} (at the failure)`);
      } catch {
        // The failure is reported either way.
      }
    }
    // The blocker itself, on a page of its own: a request to a third origin is recorded.
    const recorded = summary.outside.length;
    const probe = await context.newPage();
    await probe.evaluate(() => fetch('http://blocked.invalid/probe').catch(() => undefined));
    await probe.close();
    summary.blockerWorks =
      summary.outside.length === recorded + 1 &&
      summary.outside[recorded].startsWith('http://blocked.invalid/');
    summary.outside = summary.outside.slice(0, recorded);
  } finally {
    await browser.close();
  }
  summary.ms = Date.now() - started;
  console.log(`ADMIN ${JSON.stringify(summary)}`);
}

try {
  await main();
} catch (err) {
  console.error(`admin run failed: ${err?.stack ?? err}`);
}
process.exit(0);
