// threadql embed: the comments of any page, from a threadql server.
//
//   <div id="comments"></div>
//   <script type="module">
//     import { mount } from "https://comments.example/embed/threadql.js";
//     mount(document.getElementById("comments"), { key: "article-42", title: "My article" });
//   </script>
//
// One ES module with no build step and no dependencies. It talks only to its own server:
// GraphQL over HTTP for reads and posts, `graphql-transport-ws` for comments as they are posted.
// Every text is put in the page as text; a comment's `html` (sanitised by the server) is
// inserted as HTML after a second pass through the same allow-list here.
//
// Guests (no token, on a server or discussion that takes guest comments) comment with a name and
// a proof of work (ALTCHA's v1 format), which threadql's own worker (/embed/proof-worker.js)
// finds while they type: directly on a page of threadql's origin, else in a hidden frame of
// threadql's (/embed/proof), since a browser runs workers of the page's origin only. What a
// guest may later edit or delete is kept by its token in the page origin's localStorage.

const GRAPHQL_WS = 'graphql-transport-ws';

// Threads per page, and replies per page at each level.
const THREADS_PER_PAGE = 20;
const REPLIES_PER_PAGE = 5;
// A title is 1 to 300 characters; a page address at most 2 048.
const MAX_TITLE = 300;
const MAX_URL = 2048;
// Waits between attempts to reopen the live connection, in milliseconds.
const RECONNECT_MS = [1000, 2000, 5000, 10000, 30000];
// How long a freshly arrived comment stays highlighted.
const ARRIVAL_MS = 4000;
// A proof solved earlier is used only while its challenge has this long left to live.
const PROOF_MARGIN_MS = 60_000;
// How long the proof frame may take to answer that it is ready.
const PROOF_FRAME_MS = 15_000;
// Where the embed keeps a guest's tokens (one per comment) and remembered name and website.
const GUEST_TOKEN_KEY = 'threadql-guest-token';
const GUEST_KEY = 'threadql-guest';

// What a comment shows. Replies are asked for separately, to the depth a view needs.
const COMMENT_FIELDS = `slug parentSlug depth posted editedAt deleted status pinned html ignoredByViewer replyCount author { id name guest }`;
const PAGE_INFO = `pageInfo { hasNextPage endCursor }`;

// A comment with two levels of replies below it: what a thread shows first.
const THREAD_TREE = `${COMMENT_FIELDS}
  replies(first: $replies) { ${PAGE_INFO} nodes { ${COMMENT_FIELDS}
    replies(first: $replies) { ${PAGE_INFO} nodes { ${COMMENT_FIELDS} } } } }`;

const DISCUSSION_QUERY = `query ThreadqlDiscussion($key: String!, $order: CommentOrder!, $first: Int!, $replies: Int!) {
  guestPolicy
  discussionByKey(key: $key) {
    id commentCount locked guests closesAt
    pinnedComments { ${COMMENT_FIELDS} }
    threads(order: $order, first: $first) { ${PAGE_INFO} nodes { ${THREAD_TREE} } }
  }
}`;

const THREADS_QUERY = `query ThreadqlThreads($id: ID!, $order: CommentOrder!, $first: Int!, $after: String, $replies: Int!) {
  discussion(id: $id) {
    commentCount
    threads(order: $order, first: $first, after: $after) { ${PAGE_INFO} nodes { ${THREAD_TREE} } }
  }
}`;

const REPLIES_QUERY = `query ThreadqlReplies($id: ID!, $slug: String!, $first: Int!, $after: String, $replies: Int!) {
  comment(discussionId: $id, slug: $slug) {
    replyCount
    replies(first: $first, after: $after) { ${PAGE_INFO} nodes { ${COMMENT_FIELDS}
      replies(first: $replies) { ${PAGE_INFO} nodes { ${COMMENT_FIELDS} } } } }
  }
}`;

const ENSURE_MUTATION = `mutation ThreadqlEnsure($input: EnsureDiscussionInput!) {
  ensureDiscussion(input: $input) { id commentCount locked guests closesAt }
}`;

const POST_MUTATION = `mutation ThreadqlPost($input: PostCommentInput!) {
  postComment(input: $input) { ${COMMENT_FIELDS} moderationReason guestToken }
}`;

const CHALLENGE_QUERY = `query ThreadqlChallenge {
  guestChallenge { algorithm challenge salt signature maxnumber }
}`;

const TEXT_QUERY = `query ThreadqlText($id: ID!, $slug: String!) { comment(discussionId: $id, slug: $slug) { text } }`;

const GUEST_EDIT_MUTATION = `mutation ThreadqlGuestEdit($input: EditCommentInput!) {
  editComment(input: $input) { ${COMMENT_FIELDS} moderationReason }
}`;

const GUEST_DELETE_MUTATION = `mutation ThreadqlGuestDelete($id: ID!, $slug: String!, $token: String) {
  deleteComment(discussionId: $id, slug: $slug, guestToken: $token) { ${COMMENT_FIELDS} }
}`;

const POSTED_SUBSCRIPTION = `subscription ThreadqlPosted($id: ID!) { commentPosted(discussionId: $id) { ${COMMENT_FIELDS} } }`;
const CHANGED_SUBSCRIPTION = `subscription ThreadqlChanged($id: ID!) { commentChanged(discussionId: $id) { ${COMMENT_FIELDS} } }`;

// The markup a comment's HTML may hold: what the server's sanitiser lets through, and no more.
const ALLOWED_TAGS = new Set([
  'p', 'br', 'em', 'strong', 'del', 'a', 'code', 'pre', 'blockquote', 'ul', 'ol', 'li', 'hr',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
]);
const ALLOWED_ATTRIBUTES = { a: new Set(['href', 'title', 'rel']), ol: new Set(['start']) };
const ALLOWED_SCHEMES = new Set(['http:', 'https:', 'mailto:']);
// Elements dropped with everything in them (any other unknown element keeps its text).
const DROPPED_TAGS = new Set(['script', 'style', 'iframe', 'object', 'embed', 'template', 'noscript', 'svg', 'math']);
const LINK_REL = 'nofollow ugc noopener';

// The defaults of the custom properties a host page may set (on any ancestor of the widget, or
// on :root) to restyle it.
const DEFAULTS = {
  '--threadql-font': 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
  '--threadql-font-size': '1rem',
  '--threadql-line-height': '1.5',
  '--threadql-color': '#1f2328',
  '--threadql-muted': '#59636e',
  '--threadql-background': 'transparent',
  '--threadql-surface': '#ffffff',
  '--threadql-border': '#d1d9e0',
  '--threadql-accent': '#0b5cad',
  '--threadql-accent-text': '#ffffff',
  '--threadql-error': '#b3261e',
  '--threadql-highlight': '#fff6d6',
  '--threadql-pinned': '#f3f0ff',
  '--threadql-focus': '#0b5cad',
  '--threadql-spacing': '0.75rem',
  '--threadql-radius': '6px',
  '--threadql-indent': '1.25rem',
};

const RULES = `
:where(.threadql) {
  font-family: var(--threadql-font);
  font-size: var(--threadql-font-size);
  line-height: var(--threadql-line-height);
  color: var(--threadql-color);
  background: var(--threadql-background);
}
:where(.threadql) :where(*) { box-sizing: border-box; }
:where(.threadql-header) {
  display: flex; flex-wrap: wrap; align-items: baseline; justify-content: space-between;
  gap: var(--threadql-spacing); margin-block-end: var(--threadql-spacing);
}
:where(.threadql-count) { margin: 0; font-size: 1.25em; }
:where(.threadql-order) { border: 0; margin: 0; padding: 0; display: flex; gap: var(--threadql-spacing); }
:where(.threadql-order legend) { float: left; margin-inline-end: calc(var(--threadql-spacing) / 2); color: var(--threadql-muted); }
:where(.threadql-order label) { cursor: pointer; }
:where(.threadql-order input) { accent-color: var(--threadql-accent); }
:where(.threadql-visually-hidden) {
  position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);
  clip-path: inset(50%); white-space: nowrap;
}
:where(.threadql-error) {
  color: var(--threadql-error); border: 1px solid currentColor; border-radius: var(--threadql-radius);
  padding: calc(var(--threadql-spacing) / 2) var(--threadql-spacing); margin: 0 0 var(--threadql-spacing);
}
:where(.threadql-error:empty) { display: none; }
:where(.threadql-notice) {
  border: 1px solid var(--threadql-border); border-radius: var(--threadql-radius);
  padding: calc(var(--threadql-spacing) / 2) var(--threadql-spacing); margin: 0 0 var(--threadql-spacing);
  color: var(--threadql-muted);
}
:where(.threadql-notice:empty) { display: none; }
:where(.threadql-form) { display: grid; gap: calc(var(--threadql-spacing) / 2); margin-block: var(--threadql-spacing); }
:where(.threadql-form textarea) {
  font: inherit; color: inherit; background: var(--threadql-surface); width: 100%; min-height: 4.5em;
  padding: calc(var(--threadql-spacing) / 2); border: 1px solid var(--threadql-border);
  border-radius: var(--threadql-radius); resize: vertical;
}
:where(.threadql-form input) {
  font: inherit; color: inherit; background: var(--threadql-surface); width: 100%; max-width: 28rem;
  padding: 0.25em 0.5em; border: 1px solid var(--threadql-border); border-radius: var(--threadql-radius);
}
:where(.threadql-guest) {
  display: grid; gap: calc(var(--threadql-spacing) / 3); margin: 0; border: 1px solid var(--threadql-border);
  border-radius: var(--threadql-radius); padding: calc(var(--threadql-spacing) / 2) var(--threadql-spacing);
}
:where(.threadql-guest legend) { padding: 0 0.25em; color: var(--threadql-muted); }
:where(.threadql-hint) { margin: 0; color: var(--threadql-muted); font-size: 0.875em; }
:where(.threadql-trap) { position: absolute; left: -10000px; top: auto; width: 1px; height: 1px; overflow: hidden; }
:where(.threadql-guest-badge) { color: var(--threadql-muted); font-style: italic; }
:where(.threadql-form-actions) { display: flex; gap: calc(var(--threadql-spacing) / 2); align-items: center; }
:where(.threadql button) {
  font: inherit; font-size: 0.875em; cursor: pointer; border-radius: var(--threadql-radius);
  border: 1px solid var(--threadql-border); background: var(--threadql-surface); color: var(--threadql-accent);
  padding: 0.25em 0.75em;
}
:where(.threadql button[type="submit"]) {
  background: var(--threadql-accent); color: var(--threadql-accent-text); border-color: var(--threadql-accent);
}
:where(.threadql button:disabled) { opacity: 0.6; cursor: progress; }
:where(.threadql :focus-visible) { outline: 2px solid var(--threadql-focus); outline-offset: 2px; }
:where(.threadql-list) { list-style: none; margin: 0; padding: 0; }
:where(.threadql-replies) {
  list-style: none; margin: 0; padding: 0; margin-inline-start: var(--threadql-indent);
  border-inline-start: 2px solid var(--threadql-border); padding-inline-start: var(--threadql-spacing);
}
:where(.threadql-replies.threadql-flat) { margin-inline-start: 0; }
:where(.threadql-comment) { margin-block: calc(var(--threadql-spacing) * 0.66); }
:where(.threadql-article) {
  background: var(--threadql-surface); border: 1px solid var(--threadql-border);
  border-radius: var(--threadql-radius); padding: calc(var(--threadql-spacing) * 0.75) var(--threadql-spacing);
  transition: background-color 0.6s;
}
:where(.threadql-arrived > .threadql-article) { background: var(--threadql-highlight); }
:where(.threadql-pinned) { margin-block-end: calc(var(--threadql-spacing) * 1.5); }
:where(.threadql-pinned .threadql-article) { background: var(--threadql-pinned); }
:where(.threadql-meta) {
  display: flex; flex-wrap: wrap; gap: 0 calc(var(--threadql-spacing) / 2); color: var(--threadql-muted);
  font-size: 0.875em; margin: 0 0 calc(var(--threadql-spacing) / 3);
}
:where(.threadql-author) { color: var(--threadql-color); font-weight: 600; }
:where(.threadql-badge) {
  border: 1px solid var(--threadql-border); border-radius: 999px; padding: 0 0.5em; font-size: 0.85em;
}
:where(.threadql-body) { overflow-wrap: anywhere; }
:where(.threadql-body > :first-child) { margin-block-start: 0; }
:where(.threadql-body > :last-child) { margin-block-end: 0; }
:where(.threadql-body a) { color: var(--threadql-accent); }
:where(.threadql-body pre) { overflow-x: auto; }
:where(.threadql-tombstone) { color: var(--threadql-muted); font-style: italic; margin: 0; }
:where(.threadql-actions) { margin-block-start: calc(var(--threadql-spacing) / 3); display: flex; gap: calc(var(--threadql-spacing) / 2); }
:where(.threadql-actions button) { border-color: transparent; background: transparent; padding-inline: 0.25em; }
:where(.threadql-actions button:hover) { text-decoration: underline; }
:where(.threadql-more) { margin-block: calc(var(--threadql-spacing) / 2); }
:where(.threadql-section-title) { font-size: 1em; margin: var(--threadql-spacing) 0 0; color: var(--threadql-muted); }
`;

// The rules, each custom property with its default as the fallback.
const STYLES = RULES.replace(/var\((--threadql-[a-z-]+)\)/g, (_, name) => `var(${name}, ${DEFAULTS[name]})`);

let styled = false;
let mounted = 0;
// The widget mounted in each element, so mounting again replaces it.
const widgets = new WeakMap();

// Adds the widget's stylesheet to the document once. Its rules have no specificity
// (`:where`), so any rule of the host page wins, and every colour, font and space is a custom
// property the host may set.
function addStyles() {
  if (styled) {
    return;
  }
  styled = true;
  if ('adoptedStyleSheets' in Document.prototype && 'replaceSync' in CSSStyleSheet.prototype) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLES);
    document.adoptedStyleSheets = [sheet, ...document.adoptedStyleSheets];
  } else {
    const style = document.createElement('style');
    style.textContent = STYLES;
    document.head.prepend(style);
  }
}

// An error the widget shows, with the server's `extensions.code` when it gave one.
class ThreadqlError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'ThreadqlError';
    this.code = code ?? null;
  }
}

// The message of any thrown value.
function messageOf(err) {
  if (err instanceof ThreadqlError || err instanceof Error) {
    return err.message;
  }
  return String(err);
}

// Creates an element with attributes (a `class`, `text`, or plain attributes) and children.
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (name === 'text') {
      node.textContent = value;
    } else if (name === 'class') {
      node.className = value;
    } else {
      node.setAttribute(name, value === true ? '' : String(value));
    }
  }
  node.append(...children.filter((child) => child !== undefined && child !== null));
  return node;
}

// Whether a comment is held or rejected by the moderators (not public, or a placeholder).
function isHeld(comment) {
  return Boolean(comment.status) && comment.status !== 'APPROVED';
}

// `html` as a fragment, cleaned against the allow-list. It is parsed in a template, where
// nothing runs or loads, then every element, attribute and address not allowed is removed.
function cleanHtml(html) {
  const template = document.createElement('template');
  template.innerHTML = html;
  cleanChildren(template.content);
  return template.content;
}

function cleanChildren(parent) {
  for (const node of [...parent.childNodes]) {
    if (node.nodeType === Node.TEXT_NODE) {
      continue;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) {
      node.remove();
      continue;
    }
    const tag = node.localName;
    if (!(node instanceof HTMLElement) || !ALLOWED_TAGS.has(tag)) {
      if (DROPPED_TAGS.has(tag)) {
        node.remove();
      } else {
        cleanChildren(node);
        node.replaceWith(...node.childNodes);
      }
      continue;
    }
    const allowed = ALLOWED_ATTRIBUTES[tag];
    for (const attribute of [...node.attributes]) {
      if (!allowed?.has(attribute.name)) {
        node.removeAttribute(attribute.name);
      }
    }
    if (tag === 'a') {
      const href = node.getAttribute('href');
      let scheme = null;
      try {
        scheme = href === null ? null : new URL(href).protocol;
      } catch {
        scheme = null;
      }
      if (!ALLOWED_SCHEMES.has(scheme)) {
        node.removeAttribute('href');
      }
      node.setAttribute('rel', LINK_REL);
    }
    cleanChildren(node);
  }
}

// The title a new discussion gets: the option, else the page's title, else the key, cut to
// the longest title the server takes.
function titleFor(options) {
  const candidates = [options.title, document.title, options.key];
  const title = candidates.find((t) => typeof t === 'string' && t.trim() !== '') ?? 'Comments';
  return Array.from(title.trim()).slice(0, MAX_TITLE).join('');
}

// The page address a new discussion records: the option, else this page's address without
// its fragment (only an http or https one, short enough for the server).
function urlFor(options) {
  if (options.url !== undefined && options.url !== null) {
    return String(options.url);
  }
  try {
    const here = new URL(window.location.href);
    here.hash = '';
    const text = here.href;
    return (here.protocol === 'http:' || here.protocol === 'https:') && text.length <= MAX_URL
      ? text
      : undefined;
  } catch {
    return undefined;
  }
}

// The token option as a value: a string, or what a function returns (awaited). Empty means
// not signed in. A bare token gets the `Bearer` scheme.
async function bearer(token) {
  let value = token;
  if (typeof token === 'function') {
    try {
      value = await token();
    } catch (err) {
      throw new ThreadqlError(`Signing in failed: ${messageOf(err)}`, 'TOKEN_FAILED');
    }
  }
  if (value === undefined || value === null || value === '') {
    return null;
  }
  if (typeof value !== 'string') {
    throw new ThreadqlError('Signing in failed: the token is not a string', 'TOKEN_FAILED');
  }
  const trimmed = value.trim();
  if (trimmed === '') {
    return null;
  }
  return /^bearer\s/i.test(trimmed) ? trimmed : `Bearer ${trimmed}`;
}

// Runs one GraphQL operation over HTTP (a POST); its `data`, or a ThreadqlError with the first
// error's message and code.
async function request(endpoint, authorization, query, variables) {
  return send(endpoint, authorization, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
}

// The SHA-256 of each query text, in hex (its persisted-query hash).
const queryHashes = new Map();

// A query's persisted-query hash; null where the page cannot hash (not a secure context).
async function queryHash(query) {
  if (!globalThis.crypto?.subtle) {
    return null;
  }
  let hash = queryHashes.get(query);
  if (!hash) {
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(query));
    hash = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
    queryHashes.set(query, hash);
  }
  return hash;
}

// The longest GET URL a read is sent as; a longer one is a POST.
const MAX_GET_URL = 8000;

// The hashes this page has sent with their texts: the server knows them.
const knownHashes = new Set();

// Runs a read by GET as a persisted query: the first time with its text (which registers it,
// so a page never meets PERSISTED_QUERY_NOT_FOUND on its first read), then by its hash alone
// (with its text again if the server forgot it). The server tags anonymous answers (an ETag,
// revalidated on every use), so the browser keeps them and asks again with If-None-Match: an
// unchanged answer costs a 304. Where the page cannot hash, or the URL would be too long, it
// is a POST.
async function persistedRead(endpoint, authorization, query, variables) {
  const hash = await queryHash(query);
  const url = (withText) => {
    const at = new URL(endpoint);
    at.searchParams.set('extensions', JSON.stringify({ persistedQuery: { version: 1, sha256Hash: hash } }));
    at.searchParams.set('variables', JSON.stringify(variables));
    if (withText) {
      at.searchParams.set('query', query);
    }
    return at;
  };
  if (!hash || url(false).href.length > MAX_GET_URL) {
    return request(endpoint, authorization, query, variables);
  }
  if (knownHashes.has(hash)) {
    try {
      return await send(url(false), authorization, { method: 'GET' });
    } catch (err) {
      if (err.code !== 'PERSISTED_QUERY_NOT_FOUND') {
        throw err;
      }
    }
  }
  const withText = url(true);
  if (withText.href.length > MAX_GET_URL) {
    return request(endpoint, authorization, query, variables);
  }
  const data = await send(withText, authorization, { method: 'GET' });
  knownHashes.add(hash);
  return data;
}

// Sends one GraphQL request (`init`: its method, headers and body); its `data`, or a
// ThreadqlError with the first error's message and code.
async function send(url, authorization, init) {
  const headers = { ...init.headers, accept: 'application/graphql-response+json, application/json' };
  if (authorization) {
    headers.authorization = authorization;
  }
  let response;
  try {
    response = await fetch(url, { ...init, headers, credentials: 'omit', mode: 'cors' });
  } catch {
    throw new ThreadqlError(`Cannot reach the comments server at ${url.origin}.`, 'NETWORK');
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const first = body?.errors?.[0];
  if (first) {
    throw new ThreadqlError(first.message ?? 'The comments server refused the request.', first.extensions?.code);
  }
  if (!response.ok || !body || typeof body.data !== 'object' || body.data === null) {
    throw new ThreadqlError(`The comments server answered HTTP ${response.status}.`, 'HTTP');
  }
  return body.data;
}

// A `graphql-transport-ws` connection holding the discussion's two subscriptions, opened again
// after a drop (with growing waits). `handlers`: `posted(comment)`, `changed(comment)`,
// `state('live' | 'closed')`, `missed()` (some events may have been lost), `error(message)`.
class LiveConnection {
  constructor(url, token, discussionId, handlers) {
    this.url = url;
    this.token = token;
    this.discussionId = discussionId;
    this.handlers = handlers;
    this.socket = null;
    this.stopped = false;
    this.attempt = 0;
    this.everLive = false;
    this.anonymous = false;
    this.timer = null;
  }

  start() {
    this.open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.socket) {
      this.socket.close(1000, 'Normal Closure');
      this.socket = null;
    }
  }

  async open() {
    if (this.stopped) {
      return;
    }
    let authorization = null;
    try {
      authorization = this.anonymous ? null : await bearer(this.token);
    } catch {
      // Live comments need no sign-in: follow them anonymously.
      authorization = null;
    }
    if (this.stopped) {
      return;
    }
    const socket = new WebSocket(this.url, GRAPHQL_WS);
    this.socket = socket;
    let acknowledged = false;
    socket.addEventListener('open', () => {
      const payload = authorization ? { Authorization: authorization } : {};
      socket.send(JSON.stringify({ type: 'connection_init', payload }));
    });
    socket.addEventListener('message', (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;
      }
      switch (message.type) {
        case 'connection_ack': {
          acknowledged = true;
          const variables = { id: this.discussionId };
          socket.send(JSON.stringify({ id: 'posted', type: 'subscribe', payload: { query: POSTED_SUBSCRIPTION, variables } }));
          socket.send(JSON.stringify({ id: 'changed', type: 'subscribe', payload: { query: CHANGED_SUBSCRIPTION, variables } }));
          if (this.everLive) {
            this.handlers.missed();
          }
          this.everLive = true;
          this.attempt = 0;
          this.handlers.state('live');
          break;
        }
        case 'ping':
          socket.send(JSON.stringify({ type: 'pong', payload: message.payload }));
          break;
        case 'next': {
          const errors = message.payload?.errors;
          if (errors?.length) {
            if (errors.some((e) => e.extensions?.code === 'EVENTS_MISSED')) {
              this.handlers.missed();
            } else {
              this.handlers.error(`Live comments: ${errors[0].message}`);
            }
            break;
          }
          const data = message.payload?.data;
          if (message.id === 'posted' && data?.commentPosted) {
            this.handlers.posted(data.commentPosted);
          } else if (message.id === 'changed' && data?.commentChanged) {
            this.handlers.changed(data.commentChanged);
          }
          break;
        }
        case 'error': {
          const first = Array.isArray(message.payload) ? message.payload[0] : message.payload;
          this.handlers.error(`Live comments stopped: ${first?.message ?? 'refused by the server'}`);
          break;
        }
        default:
          break;
      }
    });
    socket.addEventListener('close', (event) => {
      if (this.socket === socket) {
        this.socket = null;
      }
      this.handlers.state('closed');
      if (this.stopped) {
        return;
      }
      if (event.code === 4403 && !this.anonymous) {
        // A token the server refuses (expired, say): live comments need none.
        this.anonymous = true;
        this.open();
        return;
      }
      if (!acknowledged && this.attempt >= RECONNECT_MS.length) {
        this.handlers.error('Live comments are unavailable: new comments show when the page is reloaded.');
        return;
      }
      const wait = RECONNECT_MS[Math.min(this.attempt, RECONNECT_MS.length - 1)];
      this.attempt += 1;
      this.timer = setTimeout(() => this.open(), wait);
    });
  }
}

// The page origin's localStorage, which a browser may refuse (then what is kept lasts as long
// as the page).
const kept = {
  memory: new Map(),
  get(key) {
    try {
      return window.localStorage.getItem(key) ?? this.memory.get(key) ?? null;
    } catch {
      return this.memory.get(key) ?? null;
    }
  },
  set(key, value) {
    this.memory.set(key, value);
    try {
      window.localStorage.setItem(key, value);
    } catch {
      // Kept in the page only.
    }
  },
  remove(key) {
    this.memory.delete(key);
    try {
      window.localStorage.removeItem(key);
    } catch {
      // Nothing was kept.
    }
  },
};

// The key a guest's token for one comment of one server is kept under.
function guestTokenKey(endpoint, discussionId, slug) {
  return `${GUEST_TOKEN_KEY} ${endpoint.origin} ${discussionId} ${slug}`;
}

// The name and website a guest gave last time (the email is left to the browser's autofill).
function rememberedGuest() {
  try {
    const value = JSON.parse(kept.get(GUEST_KEY) ?? '{}');
    return { name: typeof value.name === 'string' ? value.name : '', website: typeof value.website === 'string' ? value.website : '' };
  } catch {
    return { name: '', website: '' };
  }
}

// When a challenge stops being accepted (milliseconds since the epoch), from its salt's
// `?expires=<unix seconds>`; null when it does not say.
function expiryOf(salt) {
  const query = String(salt).split('?')[1];
  const seconds = query ? Number(new URLSearchParams(query).get('expires')) : NaN;
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : null;
}

// Guests' proofs of work. One worker (threadql's /embed/proof-worker.js), made on first use:
// directly when the page is of threadql's origin, else inside a hidden frame of threadql's
// (/embed/proof) that passes the messages on. `prepare()` fetches a challenge and starts solving
// it (once; again after each `take()`); `take()` resolves with the payload a post carries, base64
// of ALTCHA's `{algorithm, challenge, number, salt, signature}`, which is used once.
class Prover {
  constructor(widget) {
    this.widget = widget;
    this.channel = null;
    this.next = null;
    this.tasks = new Map();
    this.count = 0;
    this.stop = () => undefined;
  }

  prepare() {
    if (this.next && !this.next.failed && !this.stale(this.next)) {
      return this.next.promise;
    }
    const task = { promise: null, failed: false, expires: null };
    task.promise = this.solve(task);
    task.promise.catch(() => {
      task.failed = true;
    });
    this.next = task;
    return task.promise;
  }

  async take() {
    const promise = this.prepare();
    this.next = null;
    return promise;
  }

  stale(task) {
    return task.expires !== null && task.expires - Date.now() < PROOF_MARGIN_MS;
  }

  async solve(task) {
    const data = await request(this.widget.endpoint, null, CHALLENGE_QUERY, {});
    const challenge = data.guestChallenge;
    if (!challenge) {
      throw new ThreadqlError('The comments server gave no challenge.');
    }
    task.expires = expiryOf(challenge.salt);
    const channel = await this.open();
    this.count += 1;
    const id = this.count;
    const answer = await new Promise((resolve, reject) => {
      this.tasks.set(id, { resolve, reject });
      channel.post({ id, ...challenge });
    });
    if (answer.number === null || answer.number === undefined) {
      throw new ThreadqlError('The proof of work found no answer.');
    }
    const payload = {
      algorithm: challenge.algorithm,
      challenge: challenge.challenge,
      number: answer.number,
      salt: challenge.salt,
      signature: challenge.signature,
    };
    return btoa(JSON.stringify(payload));
  }

  // An answer of the worker: a task's result, or a failure of the worker itself.
  hear(message) {
    if (message?.type === 'error') {
      this.fail(new ThreadqlError(`The proof of work cannot run: ${message.error}`, 'PROOF'));
      return;
    }
    const task = this.tasks.get(message?.id);
    if (!task) {
      return;
    }
    this.tasks.delete(message.id);
    if (message.error) {
      task.reject(new ThreadqlError(`The proof of work cannot run: ${message.error}`, 'PROOF'));
    } else {
      task.resolve(message);
    }
  }

  fail(err) {
    for (const task of this.tasks.values()) {
      task.reject(err);
    }
    this.tasks.clear();
    this.channel = null;
  }

  // The worker, as `{ post(message) }`, made once.
  open() {
    this.channel ??= this.connect().catch((err) => {
      this.channel = null;
      throw err;
    });
    return this.channel;
  }

  async connect() {
    const workerUrl = new URL('proof-worker.js', import.meta.url);
    if (workerUrl.origin === window.location.origin) {
      const worker = new Worker(workerUrl);
      this.stop = () => worker.terminate();
      worker.addEventListener('message', (event) => this.hear(event.data));
      worker.addEventListener('error', () => this.hear({ type: 'error', error: 'the proof worker failed' }));
      return { post: (message) => worker.postMessage(message) };
    }
    const frameUrl = new URL('proof', import.meta.url);
    const frame = el('iframe', {
      class: 'threadql-proof-frame',
      src: frameUrl.href,
      title: 'Proof of work',
      hidden: true,
      'aria-hidden': 'true',
      tabindex: '-1',
      sandbox: 'allow-scripts allow-same-origin',
    });
    const { port1, port2 } = new MessageChannel();
    const ready = new Promise((resolve, reject) => {
      const timer = window.setTimeout(
        () => reject(new ThreadqlError('The proof of work cannot run: its frame did not answer.', 'PROOF')),
        PROOF_FRAME_MS,
      );
      port1.addEventListener('message', (event) => {
        if (event.data?.type === 'ready') {
          window.clearTimeout(timer);
          resolve();
        } else {
          this.hear(event.data);
        }
      });
    });
    port1.start();
    frame.addEventListener('load', () => {
      frame.contentWindow?.postMessage({ type: 'threadql-proof' }, frameUrl.origin, [port2]);
    }, { once: true });
    this.stop = () => frame.remove();
    this.widget.root.append(frame);
    await ready;
    return { post: (message) => port1.postMessage(message) };
  }
}

// One mounted widget.
class Widget {
  constructor(element, options) {
    this.element = element;
    this.options = options;
    this.id = `threadql-${(mounted += 1)}`;
    this.endpoint = null;
    this.order = 'CHRONOLOGICAL';
    this.discussion = null;
    this.comments = new Map();
    // Every comment counted or shown, so a comment heard twice (its post's answer and its
    // event) counts once.
    this.seen = new Set();
    this.threadsPage = null;
    this.live = null;
    this.loading = null;
    this.pending = [];
    this.destroyed = false;
    this.composerState = null;
    // Whether the last read was signed in: 'user', 'none' (no token), 'failed' (the token
    // option threw).
    this.identity = 'none';
    // The server's policy for guests, and the discussion's once it exists.
    this.serverGuests = 'OFF';
    this.prover = new Prover(this);
    this.build();
  }

  // The static frame: header with the count and the order switch, messages, the new-thread
  // box, pinned comments, threads and "more comments".
  build() {
    this.count = el('h2', { class: 'threadql-count', id: `${this.id}-count`, text: 'Comments' });
    const orderName = `${this.id}-order`;
    this.orderInputs = [
      ['CHRONOLOGICAL', 'Oldest first'],
      ['NEWEST', 'Newest first'],
    ].map(([value, label]) => {
      const input = el('input', { type: 'radio', name: orderName, value, checked: value === this.order });
      input.addEventListener('change', () => {
        if (input.checked) {
          this.setOrder(value);
        }
      });
      return el('label', {}, input, ` ${label}`);
    });
    this.orderSwitch = el(
      'fieldset',
      { class: 'threadql-order' },
      el('legend', { text: 'Order' }),
      ...this.orderInputs,
    );
    this.error = el('p', { class: 'threadql-error', role: 'alert' });
    this.notice = el('div', { class: 'threadql-notice' });
    this.announcer = el('div', { class: 'threadql-visually-hidden', 'aria-live': 'polite', 'aria-atomic': 'true' });
    this.composer = el('div', { class: 'threadql-composer' });
    this.pinnedTitle = el('h3', { class: 'threadql-section-title', id: `${this.id}-pinned`, text: 'Pinned' });
    this.pinned = el('ul', { class: 'threadql-list threadql-pinned', 'aria-labelledby': `${this.id}-pinned` });
    this.pinnedSection = el('div', { hidden: true }, this.pinnedTitle, this.pinned);
    this.threads = el('ul', { class: 'threadql-list threadql-threads', 'aria-labelledby': `${this.id}-count` });
    this.moreThreads = el('button', { type: 'button', class: 'threadql-more threadql-more-threads', hidden: true, text: 'More comments' });
    this.moreThreads.addEventListener('click', () => this.loadMoreThreads());
    this.root = el(
      'section',
      { class: 'threadql', 'aria-labelledby': `${this.id}-count`, 'aria-busy': 'true' },
      el('div', { class: 'threadql-header' }, this.count, this.orderSwitch),
      this.error,
      this.notice,
      this.announcer,
      this.composer,
      this.pinnedSection,
      this.threads,
      this.moreThreads,
    );
    this.element.replaceChildren(this.root);
  }

  get canPost() {
    const token = this.options.token;
    return typeof token === 'function' || (typeof token === 'string' && token.trim() !== '');
  }

  // The policy for guests that applies here: the discussion's, else the server's.
  get guestPolicy() {
    return this.discussion?.guests ?? this.serverGuests ?? 'OFF';
  }

  // Whether the comment boxes are a guest's: no token, and guests are taken here.
  get asGuest() {
    return this.identity === 'none' && this.guestPolicy !== 'OFF';
  }

  // Whether the discussion shown closed to new comments (`closesAt` is past; moderators may
  // still act through the API, not through this widget).
  get closed() {
    const at = this.discussion?.closesAt;
    return typeof at === 'string' && Date.parse(at) <= Date.now();
  }

  // Whether comment boxes and reply buttons are shown (a token, or guests taken).
  get canWrite() {
    return this.asGuest || this.canPost;
  }

  showError(message) {
    this.error.textContent = message;
  }

  clearError() {
    this.error.textContent = '';
  }

  announce(message) {
    // A change of text is what a screen reader reads out; the same text twice must change too.
    this.announcer.textContent = '';
    window.setTimeout(() => {
      this.announcer.textContent = message;
    }, 50);
  }

  // A read, signed in when the host gave a token (a token that cannot be had reads anonymously,
  // and says so).
  async read(query, variables) {
    let authorization = null;
    try {
      authorization = await bearer(this.options.token);
      this.identity = authorization ? 'user' : 'none';
    } catch (err) {
      this.identity = 'failed';
      this.showError(messageOf(err));
    }
    return persistedRead(this.endpoint, authorization, query, variables);
  }

  // A write: it needs a token.
  async write(query, variables) {
    const authorization = await bearer(this.options.token);
    if (!authorization) {
      throw new ThreadqlError('Sign in to comment.', 'UNAUTHENTICATED');
    }
    return request(this.endpoint, authorization, query, variables);
  }

  // Reads the discussion from the start, in the current order.
  async load() {
    const key = this.options.key;
    if (typeof key !== 'string' || key === '') {
      this.showError('This comments section has no key: mount it with `{ key: "…" }`.');
      this.root.setAttribute('aria-busy', 'false');
      return;
    }
    try {
      this.endpoint = new URL(this.options.endpoint ?? '/graphql', import.meta.url);
    } catch {
      this.showError(`The comments endpoint ${JSON.stringify(String(this.options.endpoint))} is not an address.`);
      this.root.setAttribute('aria-busy', 'false');
      return;
    }
    this.root.setAttribute('aria-busy', 'true');
    this.clearError();
    const loading = {};
    this.loading = loading;
    try {
      const data = await this.read(DISCUSSION_QUERY, {
        key,
        order: this.order,
        first: THREADS_PER_PAGE,
        replies: REPLIES_PER_PAGE,
      });
      if (this.loading !== loading || this.destroyed) {
        return;
      }
      this.serverGuests = data.guestPolicy ?? 'OFF';
      this.show(data.discussionByKey);
    } catch (err) {
      if (this.loading === loading && !this.destroyed) {
        this.showError(`Comments could not be loaded: ${messageOf(err)}`);
      }
    } finally {
      if (this.loading === loading) {
        this.loading = null;
        this.root.setAttribute('aria-busy', 'false');
        for (const comment of this.pending.splice(0)) {
          this.arrive(comment, false);
        }
      }
    }
  }

  // Shows a discussion as read (null: none with this key yet).
  show(discussion) {
    this.comments.clear();
    this.seen.clear();
    this.pinned.replaceChildren();
    this.threads.replaceChildren();
    this.notice.replaceChildren();
    this.discussion = discussion
      ? { id: discussion.id, commentCount: discussion.commentCount, locked: discussion.locked, guests: discussion.guests, closesAt: discussion.closesAt }
      : null;
    this.renderComposer();
    this.updateCount();
    if (!discussion) {
      this.threadsPage = { hasNextPage: false, endCursor: null };
      this.updateThreadsFooter();
      return;
    }
    const pinned = discussion.pinnedComments ?? [];
    for (const comment of pinned) {
      this.pinned.append(this.renderPinned(comment));
    }
    this.pinnedSection.hidden = pinned.length === 0;
    this.addThreads(discussion.threads);
    this.follow();
  }

  // Opens the live connection for the discussion shown (once).
  follow() {
    if (this.live || !this.discussion || this.destroyed) {
      return;
    }
    const url = new URL(this.endpoint);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    this.live = new LiveConnection(url, this.options.token, this.discussion.id, {
      posted: (comment) => {
        if (this.loading) {
          // The list is being read again: place the comment once it is shown.
          this.pending.push(comment);
        } else {
          this.arrive(comment, false);
        }
      },
      changed: (comment) => this.change(comment),
      state: (state) => this.root.setAttribute('data-live', state),
      missed: () => this.offerReload('Live comments were interrupted: some may be missing.'),
      error: (message) => this.showError(message),
    });
    this.live.start();
  }

  offerReload(message) {
    const button = el('button', { type: 'button', text: 'Reload comments' });
    button.addEventListener('click', () => this.reload());
    this.notice.replaceChildren(el('span', { text: `${message} ` }), button);
  }

  async reload() {
    if (this.live) {
      this.live.stop();
      this.live = null;
    }
    await this.load();
  }

  updateCount() {
    const n = this.discussion?.commentCount ?? 0;
    this.count.textContent = n === 0 ? 'No comments yet' : n === 1 ? '1 comment' : `${n} comments`;
  }

  // The box for a new thread, or why there is none; kept (with its draft) while that holds.
  renderComposer() {
    const state = this.discussion?.locked ? 'locked' : this.closed ? 'closed' : this.asGuest ? `guest-${this.guestPolicy}` : this.canPost ? 'open' : 'none';
    if (state === this.composerState) {
      return;
    }
    this.composerState = state;
    if (state === 'locked') {
      this.composer.replaceChildren(el('p', { class: 'threadql-notice', text: 'This discussion is locked: no new comments.' }));
    } else if (state === 'closed') {
      this.composer.replaceChildren(el('p', { class: 'threadql-notice', text: 'Comments are closed' }));
    } else if (state !== 'none') {
      this.composer.replaceChildren(this.renderForm(null, 'Add a comment', 'Post comment'));
    } else {
      this.composer.replaceChildren();
    }
  }

  // A form posting a comment (a reply to `parentSlug`, or a new thread). `onCancel`, when
  // given, closes it: on Escape, on Cancel, and with the comment after a successful post.
  renderForm(parentSlug, labelText, buttonText, onCancel) {
    const n = (mounted += 1);
    const textareaId = `${this.id}-text-${n}`;
    const errorId = `${this.id}-error-${n}`;
    const textarea = el('textarea', { id: textareaId, name: 'text', rows: 3, 'aria-describedby': errorId });
    const error = el('p', { class: 'threadql-error', id: errorId, role: 'alert' });
    const submit = el('button', { type: 'submit', text: buttonText });
    const actions = el('div', { class: 'threadql-form-actions' }, submit);
    if (onCancel) {
      const cancel = el('button', { type: 'button', text: 'Cancel' });
      cancel.addEventListener('click', () => onCancel());
      actions.append(cancel);
    }
    const guest = this.asGuest ? this.renderGuestFields(n) : null;
    const form = el(
      'form',
      { class: 'threadql-form', novalidate: true },
      guest?.fieldset,
      el('label', { for: textareaId, text: labelText }),
      textarea,
      error,
      actions,
    );
    if (guest) {
      // The proof is found while the guest types, so that posting does not wait for it.
      form.addEventListener('focusin', () => this.prover.prepare().catch(() => undefined));
    }
    textarea.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit();
      } else if (event.key === 'Escape' && onCancel) {
        event.preventDefault();
        onCancel();
      }
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const text = textarea.value;
      const asGuest = guest?.values();
      if (asGuest && asGuest.name === '') {
        error.textContent = 'Give a name to comment as a guest.';
        guest.name.focus();
        return;
      }
      if (text.trim() === '') {
        error.textContent = 'Write something first.';
        textarea.focus();
        return;
      }
      error.textContent = '';
      submit.disabled = true;
      textarea.setAttribute('aria-busy', 'true');
      const label = submit.textContent;
      submit.textContent = 'Posting…';
      try {
        const comment = await this.post(parentSlug, text, asGuest);
        textarea.value = '';
        if (asGuest) {
          kept.set(GUEST_KEY, JSON.stringify({ name: asGuest.name, website: asGuest.website ?? '' }));
        }
        if (isHeld(comment)) {
          const reason = comment.moderationReason ? ` (${comment.moderationReason})` : '';
          const told = comment.status === 'REJECTED'
            ? `Your comment was not published${reason}.`
            : `Your comment is waiting for a moderator${reason}.`;
          error.textContent = told;
          this.announce(told);
          return;
        }
        if (onCancel) {
          onCancel(comment);
        }
        this.focusComment(comment.slug);
      } catch (err) {
        error.textContent = `Not posted: ${messageOf(err)}`;
        textarea.focus();
      } finally {
        submit.disabled = false;
        submit.textContent = label;
        textarea.removeAttribute('aria-busy');
      }
    });
    return form;
  }

  // What a guest gives with a comment: a name (required), an email and a website (optional,
  // for the moderators only), and a field people never see, which only robots fill in.
  renderGuestFields(n) {
    const id = (field) => `${this.id}-${field}-${n}`;
    const remembered = rememberedGuest();
    const input = (field, attributes) => el('input', { id: id(field), name: field, ...attributes });
    const name = input('name', { type: 'text', autocomplete: 'name', required: true, 'aria-required': 'true', value: remembered.name || null });
    const email = input('email', { type: 'email', autocomplete: 'email' });
    const website = input('website', { type: 'url', autocomplete: 'url', value: remembered.website || null });
    // The honeypot: off-screen, hidden from assistive technology, out of the tab order.
    const trap = input('subject', { type: 'text', autocomplete: 'off', tabindex: '-1' });
    const trapBox = el('div', { class: 'threadql-trap', 'aria-hidden': 'true' }, el('label', { for: id('subject'), text: 'Subject (leave this empty)' }), trap);
    Object.assign(trapBox.style, { position: 'absolute', left: '-10000px', width: '1px', height: '1px', overflow: 'hidden' });
    const held = this.guestPolicy === 'PRE'
      ? el('p', { class: 'threadql-hint', text: 'A moderator reads comments from guests before they are shown.' })
      : null;
    const fieldset = el(
      'fieldset',
      { class: 'threadql-guest' },
      el('legend', { text: 'Comment as a guest' }),
      el('label', { for: id('name'), text: 'Name (shown with your comment)' }),
      name,
      el('label', { for: id('email'), text: 'Email (optional, never shown to anyone but the moderators)' }),
      email,
      el('label', { for: id('website'), text: 'Website (optional, never shown to anyone but the moderators)' }),
      website,
      held,
      trapBox,
    );
    const optional = (field) => field.value.trim() || null;
    return {
      fieldset,
      name,
      values: () => ({
        name: name.value.trim(),
        email: optional(email),
        website: optional(website),
        trap: trap.value || null,
      }),
    };
  }

  // Posts a comment (as a guest when `guest` holds the guest's fields), first creating the
  // discussion when this key has none yet.
  async post(parentSlug, text, guest) {
    // A guest's writes go without a token: the proof and the fields stand for one.
    const write = (query, variables) => (guest ? request(this.endpoint, null, query, variables) : this.write(query, variables));
    if (!this.discussion) {
      const data = await write(ENSURE_MUTATION, {
        input: { key: this.options.key, title: titleFor(this.options), url: urlFor(this.options) },
      });
      const ensured = data.ensureDiscussion;
      if (!ensured) {
        throw new ThreadqlError('The discussion could not be created.');
      }
      if (ensured.commentCount > 0) {
        // Someone else started it meanwhile: show what it holds before adding to it.
        const shown = await this.read(DISCUSSION_QUERY, {
          key: this.options.key,
          order: this.order,
          first: THREADS_PER_PAGE,
          replies: REPLIES_PER_PAGE,
        });
        this.show(shown.discussionByKey);
      } else {
        this.discussion = { id: ensured.id, commentCount: 0, locked: ensured.locked, guests: ensured.guests, closesAt: ensured.closesAt };
        this.threadsPage = { hasNextPage: false, endCursor: null };
        this.follow();
      }
    }
    const input = { discussionId: this.discussion.id, parentSlug, text };
    let data;
    try {
      if (guest) {
        // Each challenge is accepted once: this post spends the proof found while the guest
        // typed, and the next one gets a new challenge.
        input.guest = { ...guest, proof: await this.prover.take() };
      }
      data = await write(POST_MUTATION, { input });
    } catch (err) {
      if (guest) {
        // Found while the guest corrects what was refused.
        this.prover.prepare().catch(() => undefined);
      }
      throw err;
    }
    const comment = data.postComment;
    if (!comment) {
      throw new ThreadqlError('The comment was not stored.');
    }
    if (comment.guestToken) {
      kept.set(guestTokenKey(this.endpoint, this.discussion.id, comment.slug), comment.guestToken);
      // Heard live before this answer came back, it is shown already: now with Edit and Delete.
      const shown = this.comments.get(comment.slug);
      if (shown) {
        this.renderContent(shown.article, shown.comment, false);
      }
    }
    // A comment held for a moderator is not public yet: it is not shown or counted here.
    if (!isHeld(comment)) {
      this.arrive(comment, true);
    }
    return comment;
  }

  // A comment that was just posted, here (`own`) or by someone else (live): counted, and shown
  // where it belongs when that place is shown: under its parent once the parent's replies are
  // all shown, as a thread at the top (newest first) or at the end (oldest first, once every
  // thread is shown). Otherwise the "more" button of its place counts it.
  arrive(comment, own) {
    if (!this.discussion || this.seen.has(comment.slug)) {
      return;
    }
    this.seen.add(comment.slug);
    this.discussion.commentCount += 1;
    this.updateCount();
    let item = null;
    if (!comment.parentSlug) {
      if (this.order === 'NEWEST') {
        item = this.renderComment(comment, null);
        this.threads.prepend(item);
      } else if (own || !this.threadsPage?.hasNextPage) {
        item = this.renderComment(comment, null);
        this.threads.append(item);
      }
      this.updateThreadsFooter();
    } else {
      const parent = this.comments.get(comment.parentSlug);
      if (parent) {
        parent.comment.replyCount += 1;
        if (own || (parent.page && !parent.page.hasNextPage)) {
          item = this.renderComment(comment, null);
          parent.replies.append(item);
        }
        this.updateRepliesFooter(parent);
      }
    }
    if (!own) {
      const name = comment.author?.name ?? 'someone';
      this.announce(comment.parentSlug ? `New reply from ${name}` : `New comment from ${name}`);
      if (item) {
        item.classList.add('threadql-arrived');
        window.setTimeout(() => item.classList.remove('threadql-arrived'), ARRIVAL_MS);
      }
    }
  }

  // A comment edited or deleted: shown anew wherever it is shown.
  change(comment) {
    const shown = this.comments.get(comment.slug);
    if (shown) {
      Object.assign(shown.comment, comment);
      this.renderContent(shown.article, shown.comment, false);
    }
    for (const pinned of this.pinned.querySelectorAll(':scope > li')) {
      if (pinned.dataset.slug === comment.slug) {
        this.renderContent(pinned.firstElementChild, comment, true);
      }
    }
  }

  // Adds a page of threads (with the replies each came with).
  addThreads(connection) {
    let first = null;
    for (const comment of connection.nodes) {
      if (this.comments.has(comment.slug)) {
        continue;
      }
      const item = this.renderComment(comment, comment.replies);
      this.threads.append(item);
      first ??= comment.slug;
    }
    this.threadsPage = connection.pageInfo;
    this.updateThreadsFooter();
    return first;
  }

  updateThreadsFooter() {
    this.moreThreads.hidden = !this.threadsPage?.hasNextPage;
  }

  async loadMoreThreads() {
    if (!this.discussion || !this.threadsPage?.hasNextPage) {
      return;
    }
    const button = this.moreThreads;
    button.disabled = true;
    const order = this.order;
    try {
      const data = await this.read(THREADS_QUERY, {
        id: this.discussion.id,
        order,
        first: THREADS_PER_PAGE,
        after: this.threadsPage.endCursor,
        replies: REPLIES_PER_PAGE,
      });
      if (order !== this.order || this.destroyed) {
        return;
      }
      const first = this.addThreads(data.discussion.threads);
      if (first) {
        this.focusComment(first);
      }
    } catch (err) {
      this.showError(`More comments could not be loaded: ${messageOf(err)}`);
    } finally {
      button.disabled = false;
    }
  }

  async setOrder(order) {
    if (order === this.order) {
      return;
    }
    this.order = order;
    await this.load();
  }

  // One comment of a thread, with the page of replies it came with (`replies`: a connection,
  // or undefined when they were not asked for).
  renderComment(comment, replies) {
    const article = el('article', { class: 'threadql-article', tabindex: '-1' });
    const item = el('li', { class: 'threadql-comment', 'data-slug': comment.slug, 'data-depth': comment.depth }, article);
    const list = el('ul', { class: comment.depth >= 5 ? 'threadql-replies threadql-flat' : 'threadql-replies' });
    const more = el('button', { type: 'button', class: 'threadql-more threadql-more-replies', hidden: true });
    // Without a page of replies, a comment without replies has them all shown.
    const page = comment.replyCount === 0 ? { hasNextPage: false, endCursor: null } : null;
    const shown = { comment: { ...comment }, item, article, replies: list, more, page };
    delete shown.comment.replies;
    this.comments.set(comment.slug, shown);
    this.seen.add(comment.slug);
    this.renderContent(article, shown.comment, false);
    more.addEventListener('click', () => this.loadMoreReplies(shown));
    item.append(list, more);
    if (replies) {
      this.addReplies(shown, replies);
    } else {
      this.updateRepliesFooter(shown);
    }
    return item;
  }

  // A pinned comment: its content, without replies or reply box.
  renderPinned(comment) {
    const article = el('article', { class: 'threadql-article' });
    this.renderContent(article, comment, true);
    return el('li', { class: 'threadql-comment', 'data-slug': comment.slug }, article);
  }

  // What a comment's article shows: who and when, the HTML (or its tombstone) and its actions.
  renderContent(article, comment, pinnedCopy) {
    const posted = new Date(comment.posted);
    const meta = el(
      'p',
      { class: 'threadql-meta' },
      el('span', { class: 'threadql-author', text: comment.author?.name ?? '' }),
      // A guest's name is whatever they typed: marked, so it cannot pass for a signed-in person.
      comment.author?.guest ? el('span', { class: 'threadql-badge threadql-guest-badge', title: 'Posted without an account', text: 'guest' }) : null,
      el('time', { datetime: comment.posted, text: Number.isNaN(posted.getTime()) ? '' : posted.toLocaleString() }),
      comment.editedAt && !comment.deleted ? el('span', { text: '(edited)' }) : null,
      comment.pinned ? el('span', { class: 'threadql-badge', text: 'Pinned' }) : null,
    );
    let body;
    if (comment.ignoredByViewer) {
      body = el('p', { class: 'threadql-tombstone', text: 'A comment from someone you ignore.' });
    } else if (comment.deleted || comment.html === null || comment.html === undefined) {
      const gone = comment.deleted || !isHeld(comment)
        ? 'This comment was deleted.'
        : comment.status === 'REJECTED'
          ? 'This comment was removed by a moderator.'
          : 'This comment is waiting for a moderator.';
      body = el('p', { class: 'threadql-tombstone', text: gone });
    } else {
      body = el('div', { class: 'threadql-body' });
      body.append(cleanHtml(comment.html));
    }
    const children = [meta, body];
    if (!pinnedCopy && !comment.deleted) {
      children.push(this.renderActions(article, comment));
    }
    article.replaceChildren(...children.filter(Boolean));
  }

  // The actions under a comment: Reply, which opens a reply box under it, and, on a comment this
  // browser posted as a guest, Edit and Delete (with the comment's guest token).
  renderActions(article, comment) {
    const replies = this.canWrite && !this.discussion?.locked && !this.closed;
    const tokenKey = this.discussion ? guestTokenKey(this.endpoint, this.discussion.id, comment.slug) : null;
    const guestToken = tokenKey ? kept.get(tokenKey) : null;
    if (!replies && !guestToken) {
      return null;
    }
    const actions = el('div', { class: 'threadql-actions' });
    if (replies) {
      actions.append(this.renderReplyButton(actions, comment));
    }
    if (guestToken) {
      const status = el('p', { class: 'threadql-error', role: 'alert' });
      const edit = el('button', { type: 'button', 'aria-expanded': 'false', text: 'Edit' });
      const remove = el('button', { type: 'button', text: 'Delete' });
      edit.addEventListener('click', () => this.editAsGuest(article, actions, edit, status, comment, tokenKey));
      remove.addEventListener('click', () => this.confirmDelete(actions, remove, status, comment, tokenKey));
      actions.append(edit, remove);
      return el('div', {}, actions, status);
    }
    return actions;
  }

  // The Reply button of a comment, which opens a reply box after `actions`.
  renderReplyButton(actions, comment) {
    const button = el('button', { type: 'button', 'aria-expanded': 'false', text: 'Reply' });
    let form = null;
    const close = () => {
      form?.remove();
      form = null;
      button.setAttribute('aria-expanded', 'false');
      button.focus();
    };
    button.addEventListener('click', () => {
      if (form) {
        close();
        return;
      }
      const name = comment.author?.name ?? '';
      form = this.renderForm(comment.slug, name ? `Reply to ${name}` : 'Reply', 'Post reply', (posted) => {
        close();
        if (posted) {
          this.focusComment(posted.slug);
        }
      });
      actions.after(form);
      button.setAttribute('aria-expanded', 'true');
      const fields = [...form.querySelectorAll('input[name="name"], textarea')];
      (fields.find((field) => field.value === '') ?? form.querySelector('textarea')).focus();
    });
    return button;
  }

  // A guest's own comment, edited in place: its text is read, changed in a box under it, and
  // sent with the comment's guest token.
  async editAsGuest(article, actions, button, status, comment, tokenKey) {
    const open = article.querySelector(':scope .threadql-edit');
    if (open) {
      open.remove();
      button.setAttribute('aria-expanded', 'false');
      return;
    }
    status.textContent = '';
    let text;
    try {
      const data = await request(this.endpoint, null, TEXT_QUERY, { id: this.discussion.id, slug: comment.slug });
      text = data.comment?.text;
    } catch (err) {
      status.textContent = `Cannot edit: ${messageOf(err)}`;
      return;
    }
    if (typeof text !== 'string') {
      status.textContent = 'Cannot edit: the comment has no text any more.';
      return;
    }
    const n = (mounted += 1);
    const textareaId = `${this.id}-edit-${n}`;
    const textarea = el('textarea', { id: textareaId, name: 'text', rows: 3 });
    textarea.value = text;
    const save = el('button', { type: 'submit', text: 'Save' });
    const cancel = el('button', { type: 'button', text: 'Cancel' });
    const error = el('p', { class: 'threadql-error', role: 'alert' });
    const form = el(
      'form',
      { class: 'threadql-form threadql-edit', novalidate: true },
      el('label', { for: textareaId, text: 'Edit your comment' }),
      textarea,
      error,
      el('div', { class: 'threadql-form-actions' }, save, cancel),
    );
    const close = () => {
      form.remove();
      button.setAttribute('aria-expanded', 'false');
      button.focus();
    };
    cancel.addEventListener('click', close);
    textarea.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        close();
      } else if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (textarea.value.trim() === '') {
        error.textContent = 'Write something first.';
        return;
      }
      save.disabled = true;
      try {
        const data = await request(this.endpoint, null, GUEST_EDIT_MUTATION, {
          input: { discussionId: this.discussion.id, slug: comment.slug, text: textarea.value, guestToken: kept.get(tokenKey) },
        });
        const edited = data.editComment;
        if (edited) {
          this.change(edited);
          this.focusComment(comment.slug);
          if (isHeld(edited)) {
            this.announce('Your comment is waiting for a moderator.');
          }
        }
      } catch (err) {
        this.forgetRefused(err, tokenKey);
        error.textContent = `Not saved: ${messageOf(err)}`;
        save.disabled = false;
      }
    });
    (status.isConnected ? status : actions).after(form);
    button.setAttribute('aria-expanded', 'true');
    textarea.focus();
  }

  // Delete, asked twice: the button becomes "Delete for good?" with a way back.
  confirmDelete(actions, button, status, comment, tokenKey) {
    status.textContent = '';
    const yes = el('button', { type: 'button', text: 'Delete for good' });
    const no = el('button', { type: 'button', text: 'Keep it' });
    const question = el('span', { class: 'threadql-confirm' }, el('span', { text: 'Delete this comment? ' }), yes, no);
    button.hidden = true;
    actions.append(question);
    yes.focus();
    no.addEventListener('click', () => {
      question.remove();
      button.hidden = false;
      button.focus();
    });
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      try {
        const data = await request(this.endpoint, null, GUEST_DELETE_MUTATION, {
          id: this.discussion.id,
          slug: comment.slug,
          token: kept.get(tokenKey),
        });
        kept.remove(tokenKey);
        if (data.deleteComment) {
          this.change(data.deleteComment);
        }
        this.focusComment(comment.slug);
        this.announce('Your comment was deleted.');
      } catch (err) {
        this.forgetRefused(err, tokenKey);
        status.textContent = `Not deleted: ${messageOf(err)}`;
        question.remove();
        button.hidden = false;
        button.focus();
      }
    });
  }

  // A guest token the server no longer takes is forgotten.
  forgetRefused(err, tokenKey) {
    if (err instanceof ThreadqlError && (err.code === 'FORBIDDEN' || err.code === 'UNAUTHENTICATED')) {
      kept.remove(tokenKey);
    }
  }

  // Adds a page of replies under a shown comment.
  addReplies(shown, connection) {
    let first = null;
    for (const reply of connection.nodes) {
      if (this.comments.has(reply.slug)) {
        continue;
      }
      shown.replies.append(this.renderComment(reply, reply.replies));
      first ??= reply.slug;
    }
    shown.page = connection.pageInfo;
    this.updateRepliesFooter(shown);
    return first;
  }

  // The "more replies" button of a comment: how many of its replies are not shown.
  updateRepliesFooter(shown) {
    const left = shown.comment.replyCount - shown.replies.children.length;
    const more = shown.page ? shown.page.hasNextPage : shown.comment.replyCount > 0;
    shown.more.hidden = !more || left <= 0;
    if (!shown.more.hidden) {
      const noun = left === 1 ? 'reply' : 'replies';
      shown.more.textContent = shown.replies.children.length > 0 ? `${left} more ${noun}` : `${left} ${noun}`;
    }
  }

  async loadMoreReplies(shown) {
    if (!this.discussion) {
      return;
    }
    shown.more.disabled = true;
    try {
      const data = await this.read(REPLIES_QUERY, {
        id: this.discussion.id,
        slug: shown.comment.slug,
        first: REPLIES_PER_PAGE,
        after: shown.page?.endCursor ?? null,
        replies: REPLIES_PER_PAGE,
      });
      if (this.destroyed || this.comments.get(shown.comment.slug) !== shown) {
        return;
      }
      shown.comment.replyCount = data.comment.replyCount;
      const first = this.addReplies(shown, data.comment.replies);
      if (first) {
        this.focusComment(first);
      }
    } catch (err) {
      this.showError(`Replies could not be loaded: ${messageOf(err)}`);
    } finally {
      shown.more.disabled = false;
    }
  }

  focusComment(slug) {
    this.comments.get(slug)?.article.focus({ preventScroll: false });
  }

  destroy() {
    this.destroyed = true;
    this.loading = null;
    this.prover.stop();
    if (this.live) {
      this.live.stop();
      this.live = null;
    }
    this.element.replaceChildren();
  }
}

/**
 * Shows the comments of the discussion keyed `options.key` in `element`.
 *
 * options:
 * - `key` (required): the page's own identifier for its discussion (1 to 512 characters);
 * - `title`, `url`: what the discussion records when the first comment creates it (default:
 *   the page's title and address);
 * - `endpoint`: the GraphQL endpoint (default: `/graphql` on the server this script came from);
 * - `token`: the signed-in visitor's bearer token, or a function returning it (or a promise of
 *   it); without one the comments are read-only, unless the server takes guest comments here
 *   (then the comment box asks for a name and proves work instead).
 *
 * Returns `{ reload(), destroy() }`.
 */
export function mount(element, options = {}) {
  if (!(element instanceof Element)) {
    throw new TypeError('threadql mount: the first argument must be an element');
  }
  addStyles();
  widgets.get(element)?.destroy();
  const widget = new Widget(element, { ...options });
  widgets.set(element, widget);
  widget.load();
  return {
    reload: () => widget.reload(),
    destroy: () => widget.destroy(),
  };
}
