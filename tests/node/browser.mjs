// Drives threadql's GraphiQL page in headless Chromium, as a person would, with every request to
// another origin blocked and recorded.
//
//   THREADQL_TOKEN=<bearer token> node tests/node/browser.mjs <base URL> <screenshot path> <discussion id>
//
// It loads the page, runs the default query, types a threaded query for the discussion into the
// editor and runs it, writes a screenshot, then puts the token in the Headers tab and posts a
// reply to the discussion's last comment, then runs a subscription and posts a comment from
// outside the browser for it to hear. It prints `SCREENSHOT <path>` and one summary line,
// `BROWSER {...}`: what each run showed in the result panel, every outside request, page error,
// console error and failed request, and `error` (null, or why it stopped early). It always exits
// with 0: the caller (tests/integration/browser.rs) reads the summary and decides. When it cannot
// run at all it prints no summary line and explains why on stderr.

import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

const CHROMIUM = '/usr/bin/chromium';
const STEP_TIMEOUT_MS = 30_000;
const SETUP = 'run ./scripts/install-deps.sh';

// The reply the third step posts (tests/integration/browser.rs looks for it).
const REPLY_TEXT = 'Posted from GraphiQL with a bearer token';
// The comment posted from outside the browser while GraphiQL runs a subscription.
const LIVE_TEXT = 'Heard live through the GraphiQL subscription';

// How many live subscriptions the server has in place (its /metrics says so).
async function liveSubscribers(base) {
  const metrics = await (await fetch(new URL('/metrics', base))).text();
  const line = metrics.split('\n').find((l) => l.startsWith('threadql_live_subscribers '));
  return line ? Number(line.split(' ')[1]) : 0;
}

// Where the result panel's JSON is, and its text as shown on screen.
async function resultPanel(page) {
  return page.evaluate(() => {
    const editor = document.querySelector('.graphiql-response .CodeMirror');
    return {
      value: editor?.CodeMirror?.getValue() ?? '',
      shown: document.querySelector('.graphiql-response')?.innerText ?? '',
    };
  });
}

// Replaces the text of the visible CodeMirror editor under `editorSelector` through the keyboard:
// click into it, select all, type.
async function typeInto(page, editorSelector, text) {
  const editor = page.locator(`${editorSelector} .CodeMirror`).filter({ visible: true });
  await editor.locator('.CodeMirror-lines').click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  // One input event, as a paste would be: typed key by key, CodeMirror would close brackets
  // and open completion lists on its own.
  await page.keyboard.insertText(text);
  const typed = await editor.evaluate((node) => node.CodeMirror.getValue());
  if (typed !== text) {
    throw new Error(`the editor holds ${JSON.stringify(typed)} after typing ${JSON.stringify(text)}`);
  }
}

// Clicks the run button and waits until the result panel holds a new JSON result that `ready`
// accepts and shows on screen every string `ready` returns; returns the parsed result.
async function run(page, ready) {
  const before = (await resultPanel(page)).value;
  await page.locator('.graphiql-execute-button').click();
  return awaitResult(page, ready, before);
}

// Waits until the result panel holds a JSON result other than `before` that `ready` accepts and
// shows on screen every string `ready` returns; returns the parsed result.
async function awaitResult(page, ready, before) {
  let last = before;
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const { value, shown } = await resultPanel(page);
    last = value;
    if (value && value !== before) {
      let result;
      try {
        result = JSON.parse(value);
      } catch {
        result = undefined;
      }
      const expected = result && ready(result);
      if (expected && expected.every((text) => shown.includes(text))) {
        return result;
      }
    }
    await page.waitForTimeout(50);
  }
  throw new Error(`no expected result within ${STEP_TIMEOUT_MS} ms; the result panel holds: ${last}`);
}

// The texts of a comment connection's nodes, or undefined while there are none.
function texts(connection) {
  const nodes = connection?.nodes;
  return nodes && nodes.length > 0 ? nodes.map((node) => node.text) : undefined;
}

async function main() {
  const [base, screenshot, discussion] = process.argv.slice(2);
  const token = process.env.THREADQL_TOKEN;
  if (!base || !screenshot || !discussion || !token) {
    console.error(
      'usage: THREADQL_TOKEN=<token> node tests/node/browser.mjs <base URL> <screenshot path> <discussion id>',
    );
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

  const origin = new URL(base).origin;
  const socketOrigin = origin.replace(/^http/, 'ws');
  const summary = {
    outside: [],
    pageErrors: [],
    consoleErrors: [],
    failedRequests: [],
    requests: 0,
    blockerWorks: false,
    defaultQuery: null,
    threaded: null,
    posted: null,
    live: null,
    screenshot: null,
    ms: 0,
    error: null,
  };
  const started = Date.now();

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    // Every request (scripts, styles, fonts, images, fetches) and every WebSocket to another
    // origin is recorded and refused.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith('data:') || url.startsWith('blob:') || new URL(url).origin === origin) {
        summary.requests += 1;
        return route.continue();
      }
      summary.outside.push(url);
      return route.abort('blockedbyclient');
    });
    await context.routeWebSocket(
      (url) => url.origin !== socketOrigin,
      (socket) => {
        summary.outside.push(socket.url());
        return socket.close();
      },
    );

    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.on('pageerror', (err) => summary.pageErrors.push(String(err?.stack ?? err)));
    page.on('console', (message) => {
      if (message.type() === 'error') {
        summary.consoleErrors.push(`${message.text()} (${message.location().url})`);
      }
    });
    page.on('requestfailed', (request) => {
      if (!summary.outside.includes(request.url())) {
        summary.failedRequests.push(`${request.url()}: ${request.failure()?.errorText}`);
      }
    });
    page.on('response', (response) => {
      if (response.status() >= 400) {
        summary.failedRequests.push(`${response.url()}: HTTP ${response.status()}`);
      }
    });

    try {
      await page.goto(new URL('/', base).href, { waitUntil: 'load' });
      await page.locator('.graphiql-container').waitFor();
      await page.locator('.graphiql-query-editor .CodeMirror').waitFor();

      // 1. The default query, as the page opens with it.
      const defaultText = await page
        .locator('.graphiql-query-editor .CodeMirror')
        .evaluate((node) => node.CodeMirror.getValue());
      const shown = await run(page, (result) => {
        const found = result?.data?.discussions?.nodes?.find((d) => d.id === discussion);
        return texts(found?.comments);
      });
      summary.defaultQuery = {
        text: defaultText,
        discussion: shown.data.discussions.nodes.find((d) => d.id === discussion),
      };

      // 2. A threaded query typed into the editor.
      const threaded = `{
  discussion(id: "${discussion}") {
    title
    comments(order: THREADED, first: 10) {
      nodes { slug depth text author { name } }
    }
  }
}`;
      await typeInto(page, '.graphiql-query-editor', threaded);
      const result = await run(page, (r) => texts(r?.data?.discussion?.comments));
      summary.threaded = result.data.discussion;
      mkdirSync(dirname(screenshot), { recursive: true });
      await page.screenshot({ path: screenshot });
      summary.screenshot = screenshot;
      console.log(`SCREENSHOT ${screenshot}`);

      // 3. A reply, signed in through the Headers tab, as the default query tells.
      const nodes = result.data.discussion.comments.nodes;
      const parent = nodes[nodes.length - 1].slug;
      await page.locator('.graphiql-editor-tools').getByRole('button', { name: 'Headers' }).click();
      await typeInto(
        page,
        '.graphiql-editor-tool',
        JSON.stringify({ Authorization: `Bearer ${token}` }),
      );
      await typeInto(
        page,
        '.graphiql-query-editor',
        `mutation {
  postComment(input: {discussionId: "${discussion}", parentSlug: "${parent}", text: "${REPLY_TEXT}"}) {
    slug depth text author { name }
  }
}`,
      );
      const posted = await run(page, (r) => {
        if (r?.errors) {
          throw new Error(`the reply was refused: ${JSON.stringify(r.errors)}`);
        }
        const comment = r?.data?.postComment;
        return comment ? [comment.text] : undefined;
      });
      summary.posted = posted.data.postComment;

      // 4. A subscription run in GraphiQL (over its WebSocket to the same origin) hears a
      // comment posted from outside the browser.
      await typeInto(
        page,
        '.graphiql-query-editor',
        `subscription {
  commentPosted(discussionId: "${discussion}") { slug text author { name } }
}`,
      );
      // GraphiQL picks the WebSocket for a subscription from the document it last parsed; when
      // the click comes before it parsed the typed text, the operation goes over HTTP and is
      // refused ("not supported on this transport"): run it again then.
      let started = false;
      for (let attempt = 0; attempt < 5 && !started; attempt += 1) {
        await page.waitForTimeout(200 * attempt);
        await page.locator('.graphiql-execute-button').click();
        const deadline = Date.now() + STEP_TIMEOUT_MS;
        while (Date.now() < deadline) {
          if ((await liveSubscribers(base)) >= 1) {
            started = true;
            break;
          }
          if ((await resultPanel(page)).value.includes('not supported on this transport')) {
            break;
          }
          await page.waitForTimeout(50);
        }
      }
      if (!started) {
        throw new Error('the subscription started in GraphiQL never reached the server');
      }
      const response = await fetch(new URL('/graphql', base), {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          query: 'mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }',
          variables: { d: discussion, t: LIVE_TEXT },
        }),
      });
      const body = await response.json();
      if (body.errors) {
        throw new Error(`the comment for the subscription was refused: ${JSON.stringify(body.errors)}`);
      }
      const heard = await awaitResult(page, (r) => {
        const comment = r?.data?.commentPosted;
        return comment ? [comment.text] : undefined;
      });
      summary.live = heard.data.commentPosted;
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

    // The blocker itself, on a page of its own: a request to another origin is recorded and refused.
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
  console.log(`BROWSER ${JSON.stringify(summary)}`);
}

try {
  await main();
} catch (err) {
  console.error(`browser run failed: ${err?.stack ?? err}`);
}
process.exit(0);
