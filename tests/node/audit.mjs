// Runs the GraphQL-over-HTTP server audits of `graphql-http` against a live endpoint.
//
//   node tests/node/audit.mjs http://127.0.0.1:8080/graphql
//
// Prints one line per audit, `<status>  <MUST|SHOULD|MAY>  <name>  <reason>`, then one summary
// line, `AUDIT {"must":{"ok":x,"total":y},"should":{...},"may":{...},"failed":[...]}`, where
// `failed` names every MUST and SHOULD audit that is not ok. It always exits with 0: the caller
// (tests/integration/audit.rs) reads the summary and decides. When it cannot run the audits at
// all it prints no summary line and explains why on stderr.

const REQUEST_TIMEOUT_MS = 15_000;
const BODY_EXCERPT_CHARS = 200;

const LEVELS = ['MUST', 'SHOULD', 'MAY'];

function levelOf(name) {
  return LEVELS.find((level) => name.startsWith(`${level} `)) ?? 'MAY';
}

// What the server actually answered, appended to a failure's reason.
async function describe(response) {
  if (!response || typeof response.status !== 'number') {
    return '';
  }
  const type = response.headers?.get?.('content-type') ?? 'none';
  let body = '';
  if (!response.bodyUsed) {
    try {
      body = (await response.clone().text()).replace(/\s+/g, ' ').trim();
    } catch {
      body = '';
    }
  }
  if (body.length > BODY_EXCERPT_CHARS) {
    body = `${body.slice(0, BODY_EXCERPT_CHARS)}...`;
  }
  return ` [got HTTP ${response.status}, content-type: ${type}${body ? `, body: ${body}` : ''}]`;
}

// Every request of the audits gives up after REQUEST_TIMEOUT_MS instead of hanging the test.
function fetchWithTimeout(input, init = {}) {
  return fetch(input, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
}

async function main() {
  const url = process.argv[2];
  if (!url) {
    console.error('usage: node tests/node/audit.mjs <graphql endpoint URL>');
    return;
  }

  let serverAudits;
  try {
    ({ serverAudits } = await import('graphql-http'));
  } catch (err) {
    console.error(
      `cannot load graphql-http (${err.message}); install the Node test dependencies with ./scripts/install-deps.sh`,
    );
    return;
  }

  const summary = {
    must: { ok: 0, total: 0 },
    should: { ok: 0, total: 0 },
    may: { ok: 0, total: 0 },
    failed: [],
  };

  // One audit at a time, in the package's order, so the output reads the same on every run.
  for (const { name, fn } of serverAudits({ url, fetchFn: fetchWithTimeout })) {
    const level = levelOf(name);
    let status;
    let reason = '';
    try {
      const result = await fn();
      status = result.status;
      if (status !== 'ok') {
        reason = `${result.reason}${await describe(result.response)}`;
      }
    } catch (err) {
      // graphql-http throws (rather than reporting) when a request fails outright.
      status = 'error';
      reason = `audit could not run: ${err?.cause?.message ?? err?.message ?? String(err)}`;
    }

    const counts = summary[level.toLowerCase()];
    counts.total += 1;
    if (status === 'ok') {
      counts.ok += 1;
    } else if (level !== 'MAY') {
      summary.failed.push(name);
    }
    console.log([status.padEnd(6), level.padEnd(6), name, reason].join('  ').trimEnd());
  }

  console.log(`AUDIT ${JSON.stringify(summary)}`);
}

try {
  await main();
} catch (err) {
  console.error(`audit run failed: ${err?.stack ?? err}`);
}
process.exit(0);
