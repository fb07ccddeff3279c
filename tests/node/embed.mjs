// Drives threadql's reference embed (/embed/threadql.js) in headless Chromium, mounted on pages of
// another origin, as a visitor would, with every request to a third origin blocked and recorded.
//
//   THREADQL_TOKEN=<visitor's token> THREADQL_OTHER_TOKEN=<another client's token> \
//     node tests/node/embed.mjs '<setup JSON>'
//
// The setup (written by tests/integration/embed.rs) names the host pages' origin (`host`),
// threadql's (`threadql`), the seeded discussion's id and the slugs of its comments by name, and
// where to write the screenshot. The steps: read the seeded page (pinned, first page, html,
// tombstone, hostile texts), page replies at three levels and threads, post a thread with the
// mouse and a reply with the keyboard alone, hear a reply and a thread another client posts,
// switch to newest first, create a discussion with its first comment on a fresh page, show a
// closed page's comments without a form, and show a
// failing sign-in, a server that is down and hostile keys on the demo page in the widget.
// It prints one summary line, `EMBED {...}`: what each step saw, every outside request, page
// error, console error, failed request, GraphQL error and dialog, and `error` (null, or why it
// stopped early). It always exits with 0: the caller reads the summary and decides. When it
// cannot run at all it prints no summary line and explains why on stderr.

import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 30_000;
const SETUP = 'run ./scripts/install-deps.sh';

const THREAD_TEXT = 'Posted from the embed: **a new thread**';
const KEYBOARD_REPLY = 'Typed with the keyboard alone';
const LIVE_REPLY = 'Heard live: a reply from another client';
const LIVE_THREAD = 'Heard live: a new thread from another client';
const LIVE_TOP = 'A third voice, heard at the top';
const FRESH_TEXT = 'The first comment of a fresh page';

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
  throw new Error(`${what}: not within ${STEP_TIMEOUT_MS} ms`);
}

// In the page: the body texts of the direct replies of the comment `slug` (or of the threads
// list when `slug` is null).
function childTexts(slug) {
  const list = slug === null
    ? document.querySelector('.threadql-threads')
    : document.querySelector(`li[data-slug="${CSS.escape(slug)}"] > .threadql-replies`);
  if (!list) {
    return null;
  }
  return [...list.children].map((li) => {
    const body = li.querySelector(':scope > article > .threadql-body, :scope > article > .threadql-tombstone');
    return body ? body.innerText.trim() : '';
  });
}

// In the page: the visible text of the widget's status line (its error), or null while empty.
function widgetError() {
  const text = document.querySelector('.threadql > .threadql-error')?.textContent ?? '';
  return text === '' ? null : text;
}

// Records the flag a hostile text would set in the page, if it is set.
async function checkXss(page, summary) {
  summary.xss ??= await page.evaluate(() => window.__threadqlXss ?? null);
}

// How many live subscriptions the server has in place (its /metrics says so).
async function liveSubscribers(threadql) {
  const metrics = await (await fetch(new URL('/metrics', threadql))).text();
  const line = metrics.split('\n').find((l) => l.startsWith('threadql_live_subscribers '));
  return line ? Number(line.split(' ')[1]) : 0;
}

// Runs a GraphQL operation as another client, over HTTP from outside the browser; its data.
async function graphqlAsOther(threadql, token, query, variables) {
  const response = await fetch(new URL('/graphql', threadql), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  if (body.errors) {
    throw new Error(`the other client's operation was refused: ${JSON.stringify(body.errors)}`);
  }
  return body.data;
}

// Posts a comment as another client; returns its slug.
async function postAsOther(threadql, token, discussion, parentSlug, text) {
  const data = await graphqlAsOther(threadql, token,
    'mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }',
    { d: discussion, p: parentSlug, t: text });
  return data.postComment.slug;
}

async function main() {
  const [setupText] = process.argv.slice(2);
  const token = process.env.THREADQL_TOKEN;
  const otherToken = process.env.THREADQL_OTHER_TOKEN;
  if (!setupText || !token || !otherToken) {
    console.error('usage: THREADQL_TOKEN=… THREADQL_OTHER_TOKEN=… node tests/node/embed.mjs <setup JSON>');
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
  const { host, threadql, discussion, slugs, threads, replies, screenshot } = setup;
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
    crossOrigin: { graphql: 0, allowOrigin: [] },
    reads: { get: 0, revalidated: 0 },
    blockerWorks: false,
    xss: null,
    steps: {},
    screenshot: null,
    ms: 0,
    error: null,
  };
  const steps = summary.steps;
  const started = Date.now();

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 900, height: 1300 } });
    await context.addInitScript((t) => {
      window.hostToken = t;
    }, token);
    // The helpers the probes below call in the page.
    await context.addInitScript(`${childTexts}\n${widgetError}\nwindow.childTexts = childTexts;\nwindow.widgetError = widgetError;`);
    // Every request and WebSocket to a third origin is recorded. (Recorded, not intercepted:
    // with interception on, Playwright answers CORS preflights itself, and the test must see
    // threadql's own answers.)
    context.on('request', (request) => {
      const url = request.url();
      if (url.startsWith('data:') || url.startsWith('blob:') || allowed.has(new URL(url).origin)) {
        summary.requests += 1;
      } else {
        summary.outside.push(url);
      }
    });
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    const watch = (p) => {
      p.on('websocket', (socket) => {
        if (new URL(socket.url()).origin !== socketOrigin) {
          summary.outside.push(socket.url());
        }
      });
      p.on('pageerror', (err) => summary.pageErrors.push(String(err?.stack ?? err)));
      p.on('console', (message) => {
        if (message.type() === 'error') {
          (p.expected ?? summary.consoleErrors).push(`${message.text()} (${message.location().url})`);
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
          (p.expected ?? summary.failedRequests).push(`${response.url()}: HTTP ${response.status()}`);
        }
        const url = new URL(response.url());
        const pageOrigin = new URL(p.url()).origin;
        const method = response.request().method();
        if (url.pathname === '/graphql' && method === 'GET') {
          summary.reads.get += 1;
          if (response.status() === 304) {
            summary.reads.revalidated += 1;
          }
        }
        if (url.pathname === '/graphql' && url.origin !== pageOrigin && method !== 'OPTIONS') {
          summary.crossOrigin.graphql += 1;
          const allowOrigin = (await response.allHeaders())['access-control-allow-origin'];
          if (!summary.crossOrigin.allowOrigin.includes(allowOrigin)) {
            summary.crossOrigin.allowOrigin.push(allowOrigin);
          }
        }
        if (url.pathname === '/graphql' && method !== 'OPTIONS' && response.status() !== 304) {
          const into = p.expected ?? summary.graphqlErrors;
          try {
            const body = await response.json();
            // A persisted read's first ask by hash alone; the embed sends the text next.
            const errors = (body.errors ?? []).filter((e) => e.extensions?.code !== 'PERSISTED_QUERY_NOT_FOUND');
            for (const error of errors) {
              into.push(`${p.url()}: ${error.message} (${error.extensions?.code})`);
            }
          } catch {
            // Not JSON: failedRequests has it when the status says so.
          }
        }
      });
    };
    watch(page);

    try {
      // 1. The seeded page, as a visitor opens it.
      await page.goto(`${host}/article`, { waitUntil: 'load' });
      await until(page, 'the first page of threads', () => document.querySelectorAll('.threadql-threads > li').length === 20);
      steps.count = await page.locator('.threadql-count').innerText();
      steps.pinned = await page.evaluate(() =>
        [...document.querySelectorAll('.threadql-pinned > li .threadql-body')].map((b) => b.innerText.trim()));
      steps.firstPage = (await page.evaluate(childTexts, null)).map((t) => t.split(':')[0]);
      steps.bold = await page.locator(`li[data-slug="${slugs['thread-01']}"] > article .threadql-body strong`).innerText();
      steps.tombstone = await page.locator(`li[data-slug="${slugs['thread-05']}"] > article .threadql-tombstone`).innerText();
      steps.underTombstone = await page.evaluate(childTexts, slugs['thread-05']);
      steps.hostile = [];
      for (const name of ['thread-02', 'thread-03', 'thread-04']) {
        steps.hostile.push(await page.locator(`li[data-slug="${slugs[name]}"] > article .threadql-body`).innerText());
      }
      // Nothing a hostile text holds became an element (the bodies hold only the markup
      // CommonMark makes) and no link goes anywhere but http(s).
      steps.hostileElements = await page.evaluate(() =>
        document.querySelectorAll(
          '.threadql script, .threadql img, .threadql svg, .threadql iframe, .threadql style, .threadql [onerror], .threadql [onclick], .threadql [onload], .threadql a[href^="javascript"]',
        ).length);

      // 2. Replies, paged at three levels: "1 more reply" under the first thread and under its
      // first reply, "2 replies" under the reply three levels down.
      steps.replies = { before: await page.evaluate(childTexts, slugs['thread-01']) };
      await page.locator(`li[data-slug="${slugs['thread-01']}"] > .threadql-more-replies`).click();
      steps.replies.after = await until(page, 'the first thread\'s last reply', (s) => {
        const texts = childTexts(s);
        return texts && texts.length === 6 ? texts : null;
      }, slugs['thread-01']);
      steps.nested = { before: await page.evaluate(childTexts, slugs['reply-1']) };
      const nestedMore = page.locator(`li[data-slug="${slugs['reply-1']}"] > .threadql-more-replies`);
      steps.nested.button = await nestedMore.innerText();
      await nestedMore.click();
      steps.nested.after = await until(page, 'the nested replies\' last one', (s) => {
        const texts = childTexts(s);
        return texts && texts.length === 6 ? texts : null;
      }, slugs['reply-1']);
      steps.deep = { before: await page.evaluate(childTexts, slugs['reply-1-1']) };
      const deepMore = page.locator(`li[data-slug="${slugs['reply-1-1']}"] > .threadql-more-replies`);
      steps.deep.button = await deepMore.innerText();
      await deepMore.click();
      steps.deep.after = await until(page, 'the replies three levels down', (s) => {
        const texts = childTexts(s);
        return texts && texts.length === 2 ? texts : null;
      }, slugs['reply-1-1']);

      // 3. More threads.
      await page.getByRole('button', { name: 'More comments' }).click();
      steps.allThreads = (await until(page, 'every thread', (n) => {
        const texts = childTexts(null);
        return texts.length === n ? texts : null;
      }, threads)).map((t) => t.split(':')[0]);
      steps.moreThreadsHidden = await page.getByRole('button', { name: 'More comments' }).isHidden();
      await checkXss(page, summary);

      // 4. A thread posted with the mouse.
      await page.getByLabel('Add a comment').fill(THREAD_TEXT);
      await page.getByRole('button', { name: 'Post comment' }).click();
      const ownSlug = await until(page, 'the posted thread', (text) => {
        const items = [...document.querySelectorAll('.threadql-threads > li')];
        const last = items[items.length - 1];
        return last?.querySelector(':scope > article .threadql-body strong')?.textContent === 'a new thread' && last.innerText.includes(text)
          ? last.dataset.slug
          : null;
      }, 'Posted from the embed');
      steps.countAfterPost = await page.locator('.threadql-count').innerText();
      // The host page set --threadql-accent: the post button wears it.
      steps.accent = await page.getByRole('button', { name: 'Post comment' })
        .evaluate((button) => getComputedStyle(button).backgroundColor);

      // 5. A reply typed with the keyboard alone: focus on Reply, Enter, type, Tab to the
      // button, Enter.
      const own = page.locator(`li[data-slug="${ownSlug}"]`);
      await own.locator(':scope > article').getByRole('button', { name: 'Reply' }).focus();
      await page.keyboard.press('Enter');
      steps.replyBoxFocused = await page.evaluate(() =>
        document.activeElement?.tagName === 'TEXTAREA' && document.activeElement.labels?.[0]?.textContent);
      await page.keyboard.type(KEYBOARD_REPLY);
      await page.keyboard.press('Tab');
      steps.tabbedTo = await page.evaluate(() => document.activeElement?.textContent);
      await page.keyboard.press('Enter');
      await until(page, 'the keyboard reply', (s) => {
        const texts = childTexts(s);
        return texts && texts.length === 1 ? texts : null;
      }, ownSlug);
      steps.focusAfterReply = await page.evaluate(() => document.activeElement?.closest('li')?.innerText.includes('Typed with the keyboard'));

      // 6. Comments another client posts arrive live: a reply under the visitor's thread, and a
      // thread at the end (oldest first, every thread shown).
      const deadline = Date.now() + STEP_TIMEOUT_MS;
      while ((await liveSubscribers(threadql)) < 2) {
        if (Date.now() > deadline) {
          throw new Error('the embed\'s subscriptions never reached the server');
        }
        await page.waitForTimeout(50);
      }
      steps.announced = [];
      const liveReply = await postAsOther(threadql, otherToken, discussion, ownSlug, LIVE_REPLY);
      await until(page, 'the live reply', (s) => {
        const texts = childTexts(s);
        return texts && texts.length === 2 ? texts : null;
      }, ownSlug);
      steps.announced.push(await until(page, 'the reply\'s announcement', () => {
        const text = document.querySelector('.threadql [aria-live]')?.textContent;
        return text?.startsWith('New reply') ? text : null;
      }));
      await postAsOther(threadql, otherToken, discussion, null, LIVE_THREAD);
      await until(page, 'the live thread', (text) => {
        const texts = childTexts(null);
        return texts[texts.length - 1] === text;
      }, LIVE_THREAD);
      steps.announced.push(await until(page, 'the thread\'s announcement', () => {
        const text = document.querySelector('.threadql [aria-live]')?.textContent;
        return text?.startsWith('New comment') ? text : null;
      }));
      steps.countAfterLive = await page.locator('.threadql-count').innerText();
      // An edit, then a delete, by the other client show where the reply is.
      await graphqlAsOther(threadql, otherToken,
        'mutation($d: ID!, $s: String!) { editComment(input: {discussionId: $d, slug: $s, text: "Heard live, then *edited*"}) { slug } }',
        { d: discussion, s: liveReply });
      steps.liveEdit = await until(page, 'the live edit', (s) => {
        const article = document.querySelector(`li[data-slug="${CSS.escape(s)}"] > article`);
        return article?.querySelector('.threadql-body em') ? article.querySelector('.threadql-meta').innerText : null;
      }, liveReply);
      await graphqlAsOther(threadql, otherToken,
        'mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }',
        { d: discussion, s: liveReply });
      steps.liveDelete = await until(page, 'the live delete', (s) => {
        const article = document.querySelector(`li[data-slug="${CSS.escape(s)}"] > article`);
        return article?.querySelector('.threadql-tombstone')?.innerText ?? null;
      }, liveReply);

      // The screenshot: the top of the page, oldest first, pinned comment and paged replies.
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.evaluate(() => document.activeElement?.blur());
      mkdirSync(dirname(screenshot), { recursive: true });
      await page.screenshot({ path: screenshot });
      summary.screenshot = screenshot;
      console.log(`SCREENSHOT ${screenshot}`);

      // 7. Newest first: the newest threads lead, then a thread posted meanwhile arrives at the
      // top.
      await page.getByLabel('Add a comment').fill('A draft outlives the switch');
      await page.getByLabel('Newest first').check();
      await until(page, 'the newest first', (text) => childTexts(null)?.[0] === text, LIVE_THREAD);
      steps.draft = await page.getByLabel('Add a comment').inputValue();
      await page.getByLabel('Add a comment').fill('');
      steps.newestPage = await page.evaluate(() => childTexts(null).length);
      // The live connection outlives the switch: the same two subscriptions.
      steps.subscribersAfterSwitch = await liveSubscribers(threadql);
      await postAsOther(threadql, otherToken, discussion, null, LIVE_TOP);
      steps.newestFirst = await until(page, 'the live thread at the top', (text) => {
        const texts = childTexts(null);
        return texts[0] === text ? texts.slice(0, 3) : null;
      }, LIVE_TOP);
      await page.getByRole('button', { name: 'More comments' }).click();
      steps.newestAll = await until(page, 'every thread, newest first', (n) => {
        const texts = childTexts(null);
        return texts.length === n ? texts.length : null;
      }, threads + 3);

      await checkXss(page, summary);

      // 8. A page whose discussion does not exist yet: its first comment creates it.
      await page.goto(`${host}/fresh`, { waitUntil: 'load' });
      steps.fresh = {
        before: await until(page, 'the empty discussion', () => {
          const count = document.querySelector('.threadql-count')?.textContent;
          return document.querySelector('.threadql')?.getAttribute('aria-busy') === 'false' ? count : null;
        }),
      };
      await page.getByLabel('Add a comment').fill(FRESH_TEXT);
      await page.getByRole('button', { name: 'Post comment' }).click();
      await until(page, 'the first comment', (text) => childTexts(null)?.[0] === text, FRESH_TEXT);
      steps.fresh.after = await page.locator('.threadql-count').innerText();

      // 8b. A pre-moderated page: the rejected comment reads as removed, and a new comment
      // waits for a moderator (the form says so; the list and the count do not change).
      await page.goto(`${host}/held`, { waitUntil: 'load' });
      steps.held = {
        placeholder: await until(page, 'the placeholder', () =>
          document.querySelector('.threadql-threads > li > article > .threadql-tombstone')?.textContent ?? null),
      };
      await page.getByLabel('Add a comment').fill('Held for review');
      await page.getByRole('button', { name: 'Post comment' }).click();
      steps.held.told = await until(page, 'the held notice', () => {
        const text = document.querySelector('.threadql-composer .threadql-error')?.textContent;
        return text ? text : null;
      });
      steps.held.count = await page.locator('.threadql-count').innerText();
      steps.held.shown = await page.evaluate(() => document.querySelectorAll('.threadql-threads > li').length);

      // 8c. A closed page: its comments are shown, and a notice instead of the form and the
      // Reply buttons.
      await page.goto(`${host}/closed`, { waitUntil: 'load' });
      steps.closed = {
        texts: await until(page, 'the closed page\'s comments', () => {
          const texts = childTexts(null);
          return texts && texts.length > 0 ? texts : null;
        }),
      };
      steps.closed.notice = await until(page, 'the closed notice', () =>
        document.querySelector('.threadql-composer .threadql-notice')?.textContent ?? null);
      steps.closed.forms = await page.evaluate(() => document.querySelectorAll('.threadql form').length);
      steps.closed.replyButtons = await page.evaluate(() =>
        [...document.querySelectorAll('.threadql button')].filter((b) => b.textContent === 'Reply').length);

      // 9. A sign-in that throws: the comments are read anonymously and the failure is shown,
      // in the widget and in the form.
      await page.goto(`${host}/throwing`, { waitUntil: 'load' });
      steps.throwing = {
        shown: await until(page, 'the anonymous read', () => {
          const n = document.querySelectorAll('.threadql-threads > li').length;
          return n > 0 ? n : null;
        }),
      };
      steps.throwing.error = await until(page, 'the sign-in failure', widgetError);
      await page.getByLabel('Add a comment').fill('Never sent');
      await page.getByRole('button', { name: 'Post comment' }).click();
      steps.throwing.postError = await until(page, 'the refused post', () => {
        const text = document.querySelector('.threadql-composer .threadql-error')?.textContent;
        return text ? text : null;
      });
      await checkXss(page, summary);

      // 10. The demo page, on threadql's own origin, under its content security policy: a key
      // holding markup shows its (empty) discussion, a key with a control character the
      // server's refusal.
      steps.demo = {};
      const hostileKey = '"><script>window.__threadqlXss="demo"</script><img src=x onerror=alert(1)>';
      await page.goto(`${threadql}/embed/demo?key=${encodeURIComponent(hostileKey)}`, { waitUntil: 'load' });
      steps.demo.hostileKey = await until(page, 'the demo\'s discussion', () =>
        document.querySelector('.threadql')?.getAttribute('aria-busy') === 'false'
          ? document.querySelector('.threadql-count')?.textContent
          : null);
      steps.demo.keyShown = await page.locator('input[name=key]').inputValue();
      await checkXss(page, summary);
      // The refusal is expected here, and so is the browser's own log line for its HTTP 400.
      page.expected = [];
      await page.goto(`${threadql}/embed/demo?key=${encodeURIComponent('bad\u0001key')}`, { waitUntil: 'load' });
      steps.demo.badKey = await until(page, 'the refused key', widgetError);
      await page.waitForTimeout(200);
      steps.demo.badKeyLogged = page.expected;
      page.expected = undefined;
      await checkXss(page, summary);
    } catch (err) {
      summary.error = String(err?.message ?? err);
      try {
        mkdirSync(dirname(screenshot), { recursive: true });
        await page.screenshot({ path: screenshot });
        summary.screenshot = screenshot;
        console.log(`SCREENSHOT ${screenshot} (at the failure)`);
      } catch {
        // The failure is reported either way.
      }
    }
    // 11. A comments server that is down, in a context of its own (the browser logs the refused
    // connection as an error of its own, and the request goes to a third origin).
    const downContext = await browser.newContext();
    try {
      const downPage = await downContext.newPage();
      await downPage.goto(`${host}/down`, { waitUntil: 'load' });
      steps.down = await until(downPage, 'the unreachable server', widgetError);
    } catch (err) {
      summary.error ??= String(err?.message ?? err);
    } finally {
      await downContext.close();
    }

    // The blocker itself, on a page of its own: a request to a third origin is recorded and refused.
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
  console.log(`EMBED ${JSON.stringify(summary)}`);
}

try {
  await main();
} catch (err) {
  console.error(`embed run failed: ${err?.stack ?? err}`);
}
process.exit(0);
