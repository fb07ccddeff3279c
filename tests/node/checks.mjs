// What the Node tests share: named checks of exact values, the one-line JSON summary the Rust
// wrapper reads, a run-time limit, and JSON over HTTP with a timeout.

import { isDeepStrictEqual } from 'node:util';

export const REQUEST_TIMEOUT_MS = 15_000;

// Named checks; `summary` is printed as `<LABEL> <JSON>` at the end of the run.
export class Checks {
  constructor(fields = {}) {
    this.summary = { ...fields, checks: [], failures: [] };
  }

  // Passes when `actual` deep-equals `expected`; prints one line either way.
  check(name, actual, expected) {
    this.summary.checks.push(name);
    if (isDeepStrictEqual(actual, expected)) {
      console.log(`ok    ${name}`);
      return true;
    }
    this.fail(name, `expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
    return false;
  }

  fail(name, message) {
    this.summary.failures.push({ name, message });
    console.log(`FAIL  ${name}: ${message}`);
  }
}

// Runs `main(checks)`, turns a throw into a failure, prints `<label> <summary JSON>` and exits:
// 1 when a check failed or `failed(summary)` says so, 2 after `timeoutMs`.
export async function runMain(label, checks, main, { timeoutMs, failed = () => false }) {
  const timer = setTimeout(() => {
    console.error(`${label}: the run did not finish within ${timeoutMs} ms`);
    checks.fail('run', `did not finish within ${timeoutMs} ms`);
    console.log(`${label} ${JSON.stringify(checks.summary)}`);
    process.exit(2);
  }, timeoutMs);
  timer.unref();
  try {
    await main(checks);
  } catch (err) {
    checks.fail('run', String(err?.stack ?? err));
  }
  console.log(`${label} ${JSON.stringify(checks.summary)}`);
  process.exit(checks.summary.failures.length > 0 || failed(checks.summary) ? 1 : 0);
}

// POSTs a JSON body and returns the parsed JSON answer.
export async function postJson(url, body, headers = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${url} answered HTTP ${response.status} with a body that is not JSON: ${text}`);
  }
}
