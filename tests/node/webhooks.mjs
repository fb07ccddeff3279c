// A webhook receiver for the tests: it takes Standard Webhooks deliveries over HTTP, verifies
// each with the reference implementation (the `standardwebhooks` package) and reports them.
//
//   node tests/node/webhooks.mjs
//
// Listens on 127.0.0.1 on a port the OS picks and prints `{"listening": <port>}` once it does.
// Then reads commands, one JSON object a line on stdin, each applying from then on and each
// acknowledged with `{"ok": "<command>"}` (or `{"error": "..."}` when it is not understood):
//   {"secrets": ["whsec_...", ...]}  the secrets every delivery is verified against, one by one
//   {"respond": [500, 500, 200]}     the statuses of the next answers, in order
//   {"otherwise": 200}               the status once that list is used up (200 at first)
//   {"delayMs": 1500}                how long to wait before answering (0 at first)
//   {"hang": true}                   take requests and never answer them (`false` answers again)
// For each request it prints one line, once it has answered (at once when it never will):
//   {"id", "timestamp", "signatures", "verified", "status", "cut", "type", "body", "path",
//    "receivedAt"}
// `verified` holds one boolean per secret, in order; `status` is null when no answer went out
// (hanging, or the client left first) and `cut` says whether the client closed the connection
// before an answer. Exits when stdin closes.

import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import { Webhook } from 'standardwebhooks';

const settings = {
  secrets: [],
  respond: [],
  otherwise: 200,
  delayMs: 0,
  hang: false,
};

function emit(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function isStatus(value) {
  return Number.isInteger(value) && value >= 100 && value <= 599;
}

// Applies one command; returns its name, or throws what is wrong with it.
function apply(command) {
  const names = Object.keys(command ?? {});
  if (names.length !== 1) {
    throw new Error(`a command has exactly one field, got ${JSON.stringify(command)}`);
  }
  const [name] = names;
  const value = command[name];
  switch (name) {
    case 'secrets':
      if (!Array.isArray(value) || !value.every((s) => typeof s === 'string')) {
        throw new Error('secrets takes a list of strings');
      }
      // Fails here, not at the first delivery, on a secret the library refuses.
      value.forEach((secret) => new Webhook(secret));
      settings.secrets = [...value];
      break;
    case 'respond':
      if (!Array.isArray(value) || !value.every(isStatus)) {
        throw new Error('respond takes a list of HTTP statuses');
      }
      settings.respond = [...value];
      break;
    case 'otherwise':
      if (!isStatus(value)) {
        throw new Error('otherwise takes an HTTP status');
      }
      settings.otherwise = value;
      break;
    case 'delayMs':
      if (!Number.isInteger(value) || value < 0) {
        throw new Error('delayMs takes a whole number of milliseconds');
      }
      settings.delayMs = value;
      break;
    case 'hang':
      if (typeof value !== 'boolean') {
        throw new Error('hang takes true or false');
      }
      settings.hang = value;
      break;
    default:
      throw new Error(`unknown command ${JSON.stringify(name)}`);
  }
  return name;
}

// Whether the reference implementation accepts the delivery with `secret`.
function verifiedWith(secret, raw, headers) {
  try {
    new Webhook(secret).verify(raw, headers);
    return true;
  } catch {
    return false;
  }
}

function parsedOrNull(raw) {
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    return null;
  }
}

const server = createServer(async (req, res) => {
  const receivedAt = Date.now();
  // Taken on arrival, so concurrent requests use the list in the order they came.
  const planned = settings.respond.length > 0 ? settings.respond.shift() : settings.otherwise;
  const { hang, delayMs, secrets } = settings;
  let cut = false;
  res.on('close', () => {
    if (!res.writableFinished) {
      cut = true;
    }
  });

  const chunks = [];
  try {
    for await (const chunk of req) {
      chunks.push(chunk);
    }
  } catch {
    cut = true;
  }
  const raw = Buffer.concat(chunks);

  const signatureHeader = req.headers['webhook-signature'];
  const timestampHeader = req.headers['webhook-timestamp'];
  const timestamp = /^\d+$/.test(timestampHeader ?? '') ? Number(timestampHeader) : null;
  const body = parsedOrNull(raw);
  const report = (status) =>
    emit({
      id: req.headers['webhook-id'] ?? null,
      timestamp,
      signatures: signatureHeader ? signatureHeader.split(' ') : [],
      verified: secrets.map((secret) => verifiedWith(secret, raw, req.headers)),
      status,
      cut,
      type: body && typeof body === 'object' ? (body.type ?? null) : null,
      body,
      path: new URL(req.url, 'http://127.0.0.1').pathname,
      receivedAt,
    });

  if (hang) {
    report(null);
    return;
  }
  if (delayMs > 0) {
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
  if (cut) {
    report(null);
    return;
  }
  // 'close' follows the end of the answer, or the client leaving before it went out.
  res.once('close', () => report(res.writableFinished ? planned : null));
  res.writeHead(planned, { 'content-type': 'text/plain' });
  res.end(`${planned}\n`);
});

server.listen(0, '127.0.0.1', () => {
  emit({ listening: server.address().port });
});

const commands = createInterface({ input: process.stdin });
commands.on('line', (line) => {
  if (line.trim() === '') {
    return;
  }
  try {
    emit({ ok: apply(JSON.parse(line)) });
  } catch (error) {
    emit({ error: String(error?.message ?? error) });
  }
});
commands.on('close', () => process.exit(0));
