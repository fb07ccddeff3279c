// An SMTP server for the tests: it takes messages over plain SMTP (no TLS), parses each one
// with mailparser and reports it, and answers as a test tells it.
//
//   node tests/node/smtp.mjs
//
// Listens on 127.0.0.1 on a port the OS picks and prints `{"listening": <port>}` once it does.
// Then reads commands, one JSON object a line on stdin, each applying from then on and each
// acknowledged with `{"ok": "<command>"}` (or `{"error": "..."}` when it is not understood):
//   {"answer": [451, {"code": 550, "text": "No such user"}, 250]}
//                          the answers to the next messages at the end of DATA, in order; then
//                          250 again (a code alone gets a stock text)
//   {"credentials": {"user": "u", "pass": "p"}}
//                          the one user name and password AUTH (PLAIN or LOGIN) accepts; any
//                          other gets 535 (null, the start: every AUTH gets 535)
//   {"requireAuth": true}  refuse MAIL, RCPT and DATA (530) before a successful AUTH (false at
//                          first: AUTH is offered and optional)
// For each message that reached the end of DATA it prints one line, once it has answered:
//   {"from", "to", "subject", "text", "html", "messageId", "references", "headers", "status",
//    "user"}
// `from` and `to` are the envelope's addresses; `headers` maps each header's lowercased name to
// its unfolded value as sent (repeated headers joined with "\n"); `references` is a list;
// `status` is the code answered; `user` the authenticated user name, or null. Exits when stdin
// closes.

import { createInterface } from 'node:readline';
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';

const settings = {
  answers: [],
  credentials: null,
};

const STOCK_TEXT = {
  250: 'OK: queued',
  421: 'Service not available',
  450: 'Mailbox unavailable',
  451: 'Local error in processing, try again later',
  452: 'Insufficient system storage',
  550: 'Mailbox unavailable',
  552: 'Message too large',
  554: 'Transaction failed',
};

function emit(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function isCode(value) {
  return Number.isInteger(value) && value >= 200 && value <= 599;
}

// An answer as `{code, text}`, from a code or from `{code, text}`.
function answerOf(value) {
  if (isCode(value)) {
    return { code: value, text: STOCK_TEXT[value] ?? `Answer ${value}` };
  }
  if (value && isCode(value.code) && typeof value.text === 'string' && value.text !== '') {
    return { code: value.code, text: value.text };
  }
  throw new Error('answer takes a list of SMTP codes or {"code", "text"} objects');
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
    case 'answer':
      if (!Array.isArray(value)) {
        throw new Error('answer takes a list');
      }
      settings.answers = value.map(answerOf);
      break;
    case 'credentials':
      if (value !== null && (typeof value?.user !== 'string' || typeof value?.pass !== 'string')) {
        throw new Error('credentials takes {"user", "pass"} or null');
      }
      settings.credentials = value === null ? null : { user: value.user, pass: value.pass };
      break;
    case 'requireAuth':
      if (typeof value !== 'boolean') {
        throw new Error('requireAuth takes true or false');
      }
      server.options.authOptional = !value;
      break;
    default:
      throw new Error(`unknown command ${JSON.stringify(name)}`);
  }
  return name;
}

// The raw header lines as {lowercased name: unfolded value}.
function headersOf(headerLines) {
  const headers = {};
  for (const { key, line } of headerLines) {
    const colon = line.indexOf(':');
    const value = line
      .slice(colon + 1)
      .replace(/\r?\n(?=[ \t])/g, '')
      .trim();
    headers[key] = key in headers ? `${headers[key]}\n${value}` : value;
  }
  return headers;
}

function listOf(value) {
  if (value === undefined || value === null) {
    return [];
  }
  return Array.isArray(value) ? value : [value];
}

const server = new SMTPServer({
  secure: false,
  disabledCommands: ['STARTTLS'],
  authMethods: ['PLAIN', 'LOGIN'],
  authOptional: true,
  allowInsecureAuth: true,
  logger: false,
  banner: 'threadql test SMTP server',
  onAuth(auth, session, callback) {
    const wanted = settings.credentials;
    if (wanted && auth.username === wanted.user && auth.password === wanted.pass) {
      callback(null, { user: auth.username });
      return;
    }
    const error = new Error('Authentication credentials invalid');
    error.responseCode = 535;
    callback(error);
  },
  onData(stream, session, callback) {
    const chunks = [];
    stream.on('data', (chunk) => chunks.push(chunk));
    stream.on('error', (error) => callback(error));
    stream.on('end', async () => {
      // Taken at the end of DATA, so messages use the list in the order they end.
      const answer = settings.answers.length > 0 ? settings.answers.shift() : answerOf(250);
      const raw = Buffer.concat(chunks);
      let parsed;
      try {
        parsed = await simpleParser(raw);
      } catch (error) {
        parsed = { headerLines: [], subject: null, text: null, html: null, error: String(error) };
      }
      emit({
        from: session.envelope.mailFrom ? session.envelope.mailFrom.address : null,
        to: session.envelope.rcptTo.map((rcpt) => rcpt.address),
        subject: parsed.subject ?? null,
        text: parsed.text ?? null,
        html: typeof parsed.html === 'string' ? parsed.html : null,
        messageId: parsed.messageId ?? null,
        references: listOf(parsed.references),
        headers: headersOf(parsed.headerLines ?? []),
        status: answer.code,
        user: session.user ?? null,
      });
      if (answer.code >= 200 && answer.code < 300) {
        callback(null, answer.text);
      } else {
        const error = new Error(answer.text);
        error.responseCode = answer.code;
        callback(error);
      }
    });
  },
});

server.on('error', (error) => {
  process.stderr.write(`smtp.mjs: ${error?.message ?? error}\n`);
});

server.listen(0, '127.0.0.1', () => {
  emit({ listening: server.server.address().port });
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
