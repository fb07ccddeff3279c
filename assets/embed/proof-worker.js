// threadql proof of work: a dedicated worker that answers a guest challenge (ALTCHA's v1 format)
// off the page's main thread. It finds the number n, from 0 to `maxnumber`, for which
// hex(SHA-256(salt + n)) is the challenge, with the browser's own SHA-256 (crypto.subtle).
//
// In:  { id, algorithm, challenge, salt, maxnumber }
// Out: { id, number, took } (took: milliseconds), { id, number: null } when no n up to
//      `maxnumber` answers, or { id, error } when it cannot work here (no crypto.subtle, say).
// A new message stops the search in progress: only the latest challenge is answered.

// How many digests are asked for at once: the browser computes them in parallel, which is
// several times faster than one at a time.
const BATCH = 64;

let current = 0;

function hex(buffer) {
  const bytes = new Uint8Array(buffer);
  let out = '';
  for (let i = 0; i < bytes.length; i += 1) {
    out += bytes[i].toString(16).padStart(2, '0');
  }
  return out;
}

async function solve(id, { algorithm, challenge, salt, maxnumber }) {
  if (algorithm !== 'SHA-256') {
    throw new Error(`unsupported algorithm ${String(algorithm)}`);
  }
  if (!self.crypto?.subtle) {
    throw new Error('this page is not a secure context (https), so the browser offers no SHA-256');
  }
  const started = performance.now();
  const encoder = new TextEncoder();
  const target = String(challenge).toLowerCase();
  const max = Math.max(0, Math.floor(Number(maxnumber) || 0));
  for (let from = 0; from <= max; from += BATCH) {
    if (id !== current) {
      return undefined;
    }
    const to = Math.min(from + BATCH - 1, max);
    const digests = [];
    for (let n = from; n <= to; n += 1) {
      digests.push(crypto.subtle.digest('SHA-256', encoder.encode(salt + n)));
    }
    const hashed = await Promise.all(digests);
    for (let i = 0; i < hashed.length; i += 1) {
      if (hex(hashed[i]) === target) {
        return { number: from + i, took: Math.round(performance.now() - started) };
      }
    }
  }
  return { number: null };
}

self.addEventListener('message', async (event) => {
  const task = event.data ?? {};
  const id = Number(task.id);
  current = id;
  try {
    const answer = await solve(id, task);
    if (answer !== undefined) {
      self.postMessage({ id, ...answer });
    }
  } catch (err) {
    self.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
