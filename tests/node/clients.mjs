// Uses threadql the way applications do, with real GraphQL clients: Apollo Client 4, urql 6 and
// graphql-ws 6.
//
//   node tests/node/clients.mjs http://127.0.0.1:8080/graphql '<setup JSON>'
//
// The setup (written by tests/integration/clients.rs) is
//   { "users": [{ "name": "Ada Lovelace", "token": "<JWT>" }, { "name": "Grace Hopper", ... }],
//     "layouts": ["PER_COMMENT", ...], "steps": ["http"] or ["subscriptions"] }
//
// "http": for each layout, creates a discussion and posts a thread (top-level comments and replies
// five levels deep), alternating Apollo Client as the first user and urql as the second; reads it
// back as a tree of nested `replies` with both clients (and once more from Apollo's normalized
// cache), pages a sub-discussion and both comment orders by cursor until `hasNextPage` is false,
// reads offset windows; then checks Apollo's automatic persisted queries over POST and GET.
// "subscriptions": on every layout, graphql-ws receives `commentPosted` (and nothing posted to
// another discussion) and `commentChanged`; once, urql's subscriptionExchange, Apollo Client's
// GraphQLWsLink and the legacy `graphql-ws` subprotocol receive `commentPosted`, and a forged
// token is refused with 4403.
//
// Prints one line per check, then
//   CLIENTS {"layouts":{"<LAYOUT>":{"comments":n,"pages":{...}}},"apq":[...],
//            "events":[{"via","field","layout","received"}],"checks":[...],"failures":[...]}
// and exits with 1 when a check failed.

import { createHash } from 'node:crypto';

import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { Client, cacheExchange, fetchExchange, subscriptionExchange } from '@urql/core';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

import { Checks, REQUEST_TIMEOUT_MS, runMain } from './checks.mjs';

const RUN_TIMEOUT_MS = 150_000;
const EVENT_TIMEOUT_MS = 5_000;
const PROBE_WAIT_MS = 500;
const PROBES = 20;

// The thread every layout gets, in posting order: a label and its parent's label. Replies are
// interleaved with other threads so that chronological and threaded order differ; A1a1a1 is five
// levels deep.
const THREAD = [
  ['A', null],
  ['B', null],
  ['A1', 'A'],
  ['C', null],
  ['A1a', 'A1'],
  ['B1', 'B'],
  ['A1a1', 'A1a'],
  ['A2', 'A'],
  ['A1a1a', 'A1a1'],
  ['B1a', 'B1'],
  ['D', null],
  ['A1b', 'A1'],
  ['C1', 'C'],
  ['A1a1a1', 'A1a1a'],
  ['B2', 'B'],
  ['E', null],
  ['D1', 'D'],
  ['A3', 'A'],
  ['B1a1', 'B1a'],
  ['F', null],
  ['C1a', 'C1'],
  ['A1a2', 'A1a'],
];

// How many replies each level of the nested read asks for (enough for every level of THREAD).
const REPLIES_FIRST = [3, 2, 2, 1, 1, 1];
const PAGE = 5;
const SUB_PAGE = 4;
const OFFSETS = [0, 3, 5, 20, 22, 30];

const CREATE = `mutation Create($title: String!, $layout: StorageLayout) {
  createDiscussion(input: {title: $title, layout: $layout}) { id title layout commentCount }
}`;

const POST = `mutation Post($d: ID!, $p: String, $t: String!) {
  postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) {
    id discussionId slug parentSlug depth text author { name }
  }
}`;

const EDIT = `mutation Edit($d: ID!, $s: String!, $t: String!) {
  editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug text }
}`;

const COMMENT_FIELDS = 'id slug text depth parentSlug replyCount author { name }';

function nestedReplies(level) {
  if (level === REPLIES_FIRST.length) {
    return COMMENT_FIELDS;
  }
  return `${COMMENT_FIELDS} replies(first: ${REPLIES_FIRST[level]}) { totalCount nodes { ${nestedReplies(level + 1)} } }`;
}

const TREE = `query Tree($id: ID!) {
  discussion(id: $id) {
    id title layout commentCount
    threads(first: 10) { totalCount nodes { ${nestedReplies(0)} } }
  }
}`;

const SUB_DISCUSSION = `query SubDiscussion($d: ID!, $s: String!, $first: Int, $after: String) {
  comment(discussionId: $d, slug: $s) {
    id slug
    subDiscussion(first: $first, after: $after) {
      totalCount edges { cursor node { id slug depth } } pageInfo { hasNextPage endCursor }
    }
  }
}`;

const COMMENTS_PAGE = `query Page($id: ID!, $order: CommentOrder!, $first: Int, $after: String) {
  discussion(id: $id) {
    id
    comments(order: $order, first: $first, after: $after) {
      totalCount edges { cursor node { id slug } } pageInfo { hasNextPage endCursor }
    }
  }
}`;

const COMMENTS_AT = `query At($id: ID!, $order: CommentOrder!, $first: Int, $offset: Int) {
  discussion(id: $id) {
    id
    comments(order: $order, first: $first, offset: $offset) {
      totalCount nodes { id slug } pageInfo { hasNextPage }
    }
  }
}`;

// Every request gives up after REQUEST_TIMEOUT_MS instead of hanging the test.
function timedFetch(input, init = {}) {
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
  return fetch(input, { ...init, signal });
}

// A value without the `__typename` fields clients add to every selection.
function plain(value) {
  if (Array.isArray(value)) {
    return value.map(plain);
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => key !== '__typename')
        .map(([key, v]) => [key, plain(v)]),
    );
  }
  return value;
}

function apolloClient(url, user, fetchImpl = timedFetch, links = []) {
  const http = new HttpLink({
    uri: url,
    fetch: fetchImpl,
    headers: user ? { authorization: `Bearer ${user.token}` } : {},
  });
  return new ApolloClient({ cache: new InMemoryCache(), link: ApolloLink.from([...links, http]) });
}

function urqlClient(url, user, exchanges = [cacheExchange, fetchExchange]) {
  return new Client({
    url,
    exchanges,
    fetch: timedFetch,
    requestPolicy: 'network-only',
    fetchOptions: () => (user ? { headers: { authorization: `Bearer ${user.token}` } } : {}),
  });
}

// One interface over both clients: `query` and `mutate` return `data` or throw.
function wrapApollo(client) {
  return {
    name: 'Apollo Client',
    async query(document, variables, fetchPolicy = 'no-cache') {
      const { data } = await client.query({ query: gql(document), variables, fetchPolicy });
      return data;
    },
    async mutate(document, variables) {
      const { data } = await client.mutate({ mutation: gql(document), variables });
      return data;
    },
  };
}

function wrapUrql(client) {
  const unwrap = ({ data, error }) => {
    if (error) {
      throw new Error(`urql: ${error.message}`);
    }
    return data;
  };
  return {
    name: 'urql',
    query: async (document, variables) => unwrap(await client.query(document, variables).toPromise()),
    mutate: async (document, variables) => unwrap(await client.mutation(document, variables).toPromise()),
  };
}

// The thread as posted: comments by label, in posting order, with children in posting order.
class Thread {
  constructor() {
    this.posted = [];
    this.byLabel = new Map();
  }

  add(label, parentLabel, comment) {
    const node = { label, comment, children: [] };
    this.posted.push(node);
    this.byLabel.set(label, node);
    if (parentLabel) {
      this.byLabel.get(parentLabel).children.push(node);
    }
  }

  tops() {
    return this.posted.filter((node) => node.comment.parentSlug === null);
  }

  // Each comment right after its parent, siblings oldest first.
  threaded(nodes = this.tops()) {
    return nodes.flatMap((node) => [node, ...this.threaded(node.children)]);
  }

  chronological() {
    return this.posted;
  }

  // What the nested read must return for `node` at `level` of REPLIES_FIRST.
  expectedTree(node, level) {
    const { id, slug, text, depth, parentSlug, author } = node.comment;
    const fields = { id, slug, text, depth, parentSlug, replyCount: node.children.length, author };
    if (level === REPLIES_FIRST.length) {
      return fields;
    }
    return {
      ...fields,
      replies: {
        totalCount: node.children.length,
        nodes: node.children
          .slice(0, REPLIES_FIRST[level])
          .map((child) => this.expectedTree(child, level + 1)),
      },
    };
  }
}

// Follows `pageInfo.endCursor` until `hasNextPage` is false; `fetchPage(after)` returns a
// connection. Returns the slugs in the order seen and the page sizes, and checks each page's
// shape on the way (into `problems`).
async function pageAll(fetchPage, first, problems) {
  const slugs = [];
  const sizes = [];
  let after = null;
  for (let page = 0; page < 100; page += 1) {
    const connection = await fetchPage(after);
    const { edges, pageInfo, totalCount } = connection;
    sizes.push(edges.length);
    slugs.push(...edges.map((edge) => edge.node.slug));
    const lastCursor = edges.length > 0 ? edges[edges.length - 1].cursor : null;
    if (edges.length > first) {
      problems.push(`page ${page} holds ${edges.length} > first ${first}`);
    }
    if (pageInfo.endCursor !== lastCursor) {
      problems.push(`page ${page}: endCursor ${pageInfo.endCursor} is not its last cursor ${lastCursor}`);
    }
    if (pageInfo.hasNextPage !== slugs.length < totalCount) {
      problems.push(`page ${page}: hasNextPage ${pageInfo.hasNextPage} after ${slugs.length} of ${totalCount}`);
    }
    if (!pageInfo.hasNextPage) {
      return { slugs, sizes };
    }
    if (edges.length === 0) {
      problems.push(`page ${page} is empty but hasNextPage is true`);
      return { slugs, sizes };
    }
    after = pageInfo.endCursor;
  }
  problems.push('more than 100 pages');
  return { slugs, sizes };
}

// Page sizes for `total` items read `first` at a time.
function expectedSizes(total, first) {
  const sizes = [];
  for (let left = total; left > 0; left -= first) {
    sizes.push(Math.min(first, left));
  }
  return sizes.length > 0 ? sizes : [0];
}

async function postThread(checks, clients, users, discussionId, layout) {
  const thread = new Thread();
  const problems = [];
  for (const [index, [label, parentLabel]] of THREAD.entries()) {
    // Ada posts through Apollo Client, Grace through urql.
    const client = clients[index % 2];
    const user = users[index % 2];
    const parent = parentLabel ? thread.byLabel.get(parentLabel).comment : null;
    const text = `${layout} ${label}: posted by ${user.name} through ${client.name}`;
    const { postComment: comment } = await client.mutate(POST, {
      d: discussionId,
      p: parent?.slug ?? null,
      t: text,
    });
    const got = plain(comment);
    const want = {
      id: `${discussionId}:${got.slug}`,
      discussionId,
      slug: got.slug,
      parentSlug: parent?.slug ?? null,
      depth: parent ? parent.depth + 1 : 0,
      text,
      author: { name: user.name },
    };
    if (JSON.stringify(got) !== JSON.stringify(want) || !got.slug.startsWith(parent ? `${parent.slug}/` : '')) {
      problems.push(`${label}: ${JSON.stringify(got)} is not ${JSON.stringify(want)}`);
    }
    thread.add(label, parentLabel, got);
  }
  checks.check(`${layout}: ${THREAD.length} posts through both clients answer with their place in the thread`, problems, []);
  return thread;
}

async function httpLayout(checks, env, layout) {
  const [ada, grace] = env.users;
  const apollo = apolloClient(env.url, ada);
  const clients = [wrapApollo(apollo), wrapUrql(urqlClient(env.url, grace))];
  const [apolloApi, urqlApi] = clients;
  const stats = { comments: 0, pages: {} };
  env.summary.layouts[layout] = stats;

  const title = `Clients on ${layout}`;
  const { createDiscussion: created } = await apolloApi.mutate(CREATE, { title, layout });
  const id = created.id;
  checks.check(`${layout}: createDiscussion with a bearer token`, plain(created), {
    id,
    title,
    layout,
    commentCount: 0,
  });

  const thread = await postThread(checks, clients, env.users, id, layout);
  const total = thread.posted.length;

  // The tree, read with nested `replies`.
  const expectedTree = {
    discussion: {
      id,
      title,
      layout,
      commentCount: total,
      threads: {
        totalCount: thread.tops().length,
        nodes: thread.tops().map((node) => thread.expectedTree(node, 0)),
      },
    },
  };
  const fromApollo = plain(await apolloApi.query(TREE, { id }, 'network-only'));
  const fromUrql = plain(await urqlApi.query(TREE, { id }));
  const fromCache = plain(await apolloApi.query(TREE, { id }, 'cache-only'));
  checks.check(`${layout}: Apollo Client reads the thread as a tree of nested replies`, fromApollo, expectedTree);
  checks.check(`${layout}: urql reads the same tree as Apollo Client`, fromUrql, fromApollo);
  checks.check(`${layout}: Apollo's normalized cache gives the same tree back`, fromCache, fromApollo);

  // A sub-discussion, paged.
  const root = thread.byLabel.get('A');
  const descendants = thread.threaded(root.children).map((node) => node.comment.slug);
  const subProblems = [];
  const sub = await pageAll(
    async (after) =>
      (await urqlApi.query(SUB_DISCUSSION, { d: id, s: root.comment.slug, first: SUB_PAGE, after })).comment
        .subDiscussion,
    SUB_PAGE,
    subProblems,
  );
  checks.check(
    `${layout}: subDiscussion of a thread, paged by cursor, is every descendant once in threaded order`,
    { slugs: sub.slugs, sizes: sub.sizes, problems: subProblems },
    { slugs: descendants, sizes: expectedSizes(descendants.length, SUB_PAGE), problems: [] },
  );

  // Both orders, paged by cursor with both clients.
  const orders = {
    CHRONOLOGICAL: thread.chronological().map((node) => node.comment.slug),
    THREADED: thread.threaded().map((node) => node.comment.slug),
  };
  for (const [order, expected] of Object.entries(orders)) {
    for (const client of clients) {
      const problems = [];
      const paged = await pageAll(
        async (after) => (await client.query(COMMENTS_PAGE, { id, order, first: PAGE, after })).discussion.comments,
        PAGE,
        problems,
      );
      const seenTwice = paged.slugs.filter((slug, i) => paged.slugs.indexOf(slug) !== i);
      checks.check(
        `${layout}: ${client.name} pages comments(order: ${order}) by cursor: every comment once, in order`,
        { slugs: paged.slugs, seenTwice, sizes: paged.sizes, problems },
        { slugs: expected, seenTwice: [], sizes: expectedSizes(total, PAGE), problems: [] },
      );
      stats.pages[`${order} ${client.name}`] = paged.sizes.length;
    }
  }
  stats.comments = new Set(orders.THREADED).size;

  // Offset windows.
  for (const [order, expected] of Object.entries(orders)) {
    const windows = [];
    for (const offset of OFFSETS) {
      const { comments } = (await urqlApi.query(COMMENTS_AT, { id, order, first: PAGE, offset })).discussion;
      windows.push({
        offset,
        totalCount: comments.totalCount,
        slugs: comments.nodes.map((node) => node.slug),
        hasNextPage: comments.pageInfo.hasNextPage,
      });
    }
    checks.check(
      `${layout}: comments(order: ${order}, first: ${PAGE}, offset) windows`,
      windows,
      OFFSETS.map((offset) => ({
        offset,
        totalCount: total,
        slugs: expected.slice(offset, offset + PAGE),
        hasNextPage: offset + PAGE < total,
      })),
    );
  }
  return id;
}

const sha256 = (text) => createHash('sha256').update(text).digest('hex');

// A fetch that remembers each request and its answer, for the APQ checks: the hash it sent, and
// the SHA-256 of the query text when it sent one.
function recordingFetch(log) {
  return async (input, init = {}) => {
    const response = await timedFetch(input, init);
    const body = await response.clone().text();
    const url = new URL(String(input));
    const method = init.method ?? 'GET';
    const sent = method === 'GET' ? Object.fromEntries(url.searchParams) : JSON.parse(init.body);
    const extensions = typeof sent.extensions === 'string' ? JSON.parse(sent.extensions) : sent.extensions;
    let answer;
    try {
      answer = JSON.parse(body);
    } catch {
      answer = { body };
    }
    log.push({
      method,
      hasQuery: typeof sent.query === 'string' && sent.query.length > 0,
      hash: extensions?.persistedQuery?.sha256Hash ?? null,
      querySha: typeof sent.query === 'string' && sent.query.length > 0 ? sha256(sent.query) : null,
      code: answer.errors?.[0]?.extensions?.code ?? null,
      data: answer.data ?? null,
    });
    return response;
  };
}

// How one request of the APQ log reads in the summary.
function describeRequest(request) {
  const sent = `${request.method} ${request.hasQuery ? 'query+hash' : 'hash only'}`;
  return `${sent} -> ${request.code ?? (request.data ? 'data' : 'nothing')}`;
}

async function persistedQueries(checks, env, discussionId) {
  const first = `query ApqTitle($id: ID!) { discussion(id: $id) { id title commentCount } }`;
  const second = `query ApqLayout($id: ID!) { discussion(id: $id) { id layout } }`;
  const run = async (client, document) => {
    const { data } = await client.query({
      query: gql(document),
      variables: { id: discussionId },
      fetchPolicy: 'no-cache',
    });
    return plain(data);
  };
  const { discussion } = await wrapUrql(urqlClient(env.url, null)).query(
    `query($id: ID!) { discussion(id: $id) { title commentCount layout } }`,
    { id: discussionId },
  );

  // Over POST: the first time hash only, refused, then again with the query; after that the
  // hash alone is enough.
  const postLog = [];
  const post = apolloClient(env.url, null, recordingFetch(postLog), [new PersistedQueryLink({ sha256 })]);
  const answers = [await run(post, first), await run(post, first)];
  // Apollo hashes the document it sends (with `__typename` added): the hash of the text it sent.
  const firstHash = postLog[1]?.querySha;
  checks.check(
    'APQ over POST: hash only -> PERSISTED_QUERY_NOT_FOUND, then query+hash; the second time hash only',
    postLog.map(({ method, hasQuery, hash, code }) => ({ method, hasQuery, hash, code })),
    [
      { method: 'POST', hasQuery: false, hash: firstHash, code: 'PERSISTED_QUERY_NOT_FOUND' },
      { method: 'POST', hasQuery: true, hash: firstHash, code: null },
      { method: 'POST', hasQuery: false, hash: firstHash, code: null },
    ],
  );
  const titleData = {
    discussion: { id: discussionId, title: discussion.title, commentCount: discussion.commentCount },
  };
  checks.check('APQ over POST: both runs answer with the data', answers, [titleData, titleData]);

  // Over GET (`useGETForHashedQueries`): a new query is refused by hash and registered by a POST;
  // then GET with the hash alone works, also for the query registered over POST above.
  const getLog = [];
  const get = apolloClient(env.url, null, recordingFetch(getLog), [
    new PersistedQueryLink({ sha256, useGETForHashedQueries: true }),
  ]);
  const layoutData = { discussion: { id: discussionId, layout: discussion.layout } };
  const getAnswers = [await run(get, second), await run(get, second), await run(get, first)];
  const secondHash = getLog[1]?.querySha;
  checks.check(
    'APQ over GET: hash only -> PERSISTED_QUERY_NOT_FOUND, then a POST with the query; then GET by hash alone',
    getLog.map(({ method, hasQuery, hash, code }) => ({ method, hasQuery, hash, code })),
    [
      { method: 'GET', hasQuery: false, hash: secondHash, code: 'PERSISTED_QUERY_NOT_FOUND' },
      { method: 'POST', hasQuery: true, hash: secondHash, code: null },
      { method: 'GET', hasQuery: false, hash: secondHash, code: null },
      { method: 'GET', hasQuery: false, hash: firstHash, code: null },
    ],
  );
  checks.check('APQ over GET: every run answers with the data', getAnswers, [layoutData, layoutData, titleData]);
  env.summary.apq = [...postLog, ...getLog].map(describeRequest);
}

async function httpStep(checks, env) {
  const ids = [];
  for (const layout of env.layouts) {
    ids.push(await httpLayout(checks, env, layout));
  }
  await persistedQueries(checks, env, ids[0]);
}

// Events of one subscription, awaited one at a time.
class Events {
  constructor() {
    this.queued = [];
    this.waiting = null;
    this.failure = null;
  }

  push(event) {
    if (this.waiting) {
      const { resolve } = this.waiting;
      this.waiting = null;
      resolve(event);
    } else {
      this.queued.push(event);
    }
  }

  error(err) {
    this.failure = err;
    if (this.waiting) {
      const { reject } = this.waiting;
      this.waiting = null;
      reject(err);
    }
  }

  // The next event, or null after `ms` without one.
  next(ms) {
    if (this.queued.length > 0) {
      return Promise.resolve(this.queued.shift());
    }
    if (this.failure) {
      return Promise.reject(this.failure);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = null;
        resolve(null);
      }, ms);
      this.waiting = {
        resolve: (event) => {
          clearTimeout(timer);
          resolve(event);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
    });
  }
}

// A subscription is live once an event arrives: `probe(n)` causes one (a post or an edit), and
// is repeated until one does. Probe events that arrive later are recognised by `isProbe`.
async function waitUntilLive(events, probe) {
  for (let n = 0; n < PROBES; n += 1) {
    await probe(n);
    const event = await events.next(PROBE_WAIT_MS);
    if (event) {
      console.log(`      live after ${n + 1} probe(s)`);
      return;
    }
  }
  throw new Error(`no event arrived after ${PROBES} probes`);
}

// Reads events until `isTarget` matches one; returns it and every other event that was neither
// the target nor a probe.
async function awaitTarget(events, isTarget, isProbe) {
  const unexpected = [];
  for (;;) {
    const event = await events.next(EVENT_TIMEOUT_MS);
    if (!event) {
      return { target: null, unexpected };
    }
    if (isTarget(event)) {
      return { target: event, unexpected };
    }
    if (!isProbe(event)) {
      unexpected.push(event);
    }
  }
}

const POSTED = `subscription Posted($id: ID!) {
  commentPosted(discussionId: $id) { discussionId slug text author { name } }
}`;

const CHANGED = `subscription Changed($id: ID!) {
  commentChanged(discussionId: $id) { discussionId slug text author { name } }
}`;

// A graphql-ws sink that feeds `events` with the subscription's field `field`.
function sinkInto(events, field) {
  return {
    next: (result) =>
      result.errors
        ? events.error(new Error(JSON.stringify(result.errors)))
        : events.push(plain(result.data[field])),
    error: (err) =>
      events.error(err instanceof Error ? err : new Error(`closed with ${err?.code} ${err?.reason ?? ''}`)),
    complete: () => events.error(new Error('the subscription completed')),
  };
}

// One discussion to watch and one not to, in `layout`, with helpers to post and edit there.
async function watchedDiscussion(env, layout) {
  const [ada] = env.users;
  const apollo = wrapApollo(apolloClient(env.url, ada));
  const create = async (title) => (await apollo.mutate(CREATE, { title, layout })).createDiscussion.id;
  const id = await create(`Watched over a WebSocket (${layout})`);
  const otherId = await create(`Not watched (${layout})`);
  const post = async (d, t) => (await apollo.mutate(POST, { d, p: null, t })).postComment;
  const edit = async (slug, t) => (await apollo.mutate(EDIT, { d: id, s: slug, t })).editComment;
  return {
    id,
    otherId,
    post,
    edit,
    probePost: (n) => post(id, `probe ${n}`),
    isProbe: (event) => event.discussionId === id && event.text.startsWith('probe '),
    expected: (comment, text = comment.text) => ({
      discussionId: id,
      slug: comment.slug,
      text,
      author: { name: ada.name },
    }),
  };
}

function recordEvent(env, via, field, layout, result) {
  env.summary.events.push({ via, field, layout, received: result.target !== null });
}

// graphql-ws (graphql-transport-ws) with the token in connectionParams: commentPosted, with a
// post to another discussion that must not arrive, and commentChanged.
async function graphqlWs(checks, env, ws, layout) {
  const watched = await watchedDiscussion(env, layout);
  const label = `graphql-ws (${layout})`;

  const posts = new Events();
  const stopPosts = ws.subscribe({ query: POSTED, variables: { id: watched.id } }, sinkInto(posts, 'commentPosted'));
  await waitUntilLive(posts, watched.probePost);
  await watched.post(watched.otherId, 'posted in the other discussion');
  const posted = await watched.post(watched.id, 'posted while subscribed');
  const postedEvent = await awaitTarget(posts, (e) => e.slug === posted.slug, watched.isProbe);
  checks.check(`${label}: commentPosted delivers the new comment, and nothing from another discussion`, postedEvent, {
    target: watched.expected(posted),
    unexpected: [],
  });
  recordEvent(env, 'graphql-transport-ws', 'commentPosted', layout, postedEvent);
  stopPosts();

  const changes = new Events();
  const stopChanges = ws.subscribe({ query: CHANGED, variables: { id: watched.id } }, sinkInto(changes, 'commentChanged'));
  await waitUntilLive(changes, (n) => watched.edit(posted.slug, `probe edit ${n}`));
  const finalText = 'edited while subscribed';
  await watched.edit(posted.slug, finalText);
  const changedEvent = await awaitTarget(
    changes,
    (e) => e.text === finalText,
    (e) => e.slug === posted.slug && e.text.startsWith('probe edit '),
  );
  checks.check(`${label}: commentChanged delivers the edited comment`, changedEvent, {
    target: watched.expected(posted, finalText),
    unexpected: [],
  });
  recordEvent(env, 'graphql-transport-ws', 'commentChanged', layout, changedEvent);
  stopChanges();
}

// urql's subscriptionExchange, forwarding to a graphql-ws client.
async function urqlSubscription(checks, env, ws, layout) {
  const watched = await watchedDiscussion(env, layout);
  const urql = urqlClient(env.url, null, [
    cacheExchange,
    fetchExchange,
    subscriptionExchange({
      forwardSubscription: (request) => ({
        subscribe: (sink) => ({ unsubscribe: ws.subscribe({ ...request, query: request.query ?? '' }, sink) }),
      }),
    }),
  ]);
  const events = new Events();
  const { unsubscribe } = urql.subscription(POSTED, { id: watched.id }).subscribe((result) => {
    if (result.error) {
      events.error(new Error(result.error.message));
    } else if (result.data) {
      events.push(plain(result.data.commentPosted));
    }
  });
  try {
    await waitUntilLive(events, watched.probePost);
    const posted = await watched.post(watched.id, 'posted while urql listens');
    const result = await awaitTarget(events, (e) => e.slug === posted.slug, watched.isProbe);
    checks.check(`urql subscriptionExchange (${layout}): commentPosted delivers the new comment`, result, {
      target: watched.expected(posted),
      unexpected: [],
    });
    recordEvent(env, 'urql', 'commentPosted', layout, result);
  } finally {
    unsubscribe();
  }
}

// Apollo Client's GraphQLWsLink over a graphql-ws client.
async function apolloSubscription(checks, env, ws, layout) {
  const watched = await watchedDiscussion(env, layout);
  const apollo = new ApolloClient({ cache: new InMemoryCache(), link: new GraphQLWsLink(ws) });
  const events = new Events();
  const subscription = apollo.subscribe({ query: gql(POSTED), variables: { id: watched.id } }).subscribe({
    next: (result) =>
      result.error ? events.error(result.error) : events.push(plain(result.data.commentPosted)),
    error: (err) => events.error(err),
  });
  try {
    await waitUntilLive(events, watched.probePost);
    const posted = await watched.post(watched.id, 'posted while Apollo Client listens');
    const result = await awaitTarget(events, (e) => e.slug === posted.slug, watched.isProbe);
    checks.check(`Apollo Client GraphQLWsLink (${layout}): commentPosted delivers the new comment`, result, {
      target: watched.expected(posted),
      unexpected: [],
    });
    recordEvent(env, 'Apollo Client', 'commentPosted', layout, result);
  } finally {
    subscription.unsubscribe();
  }
}

// How a graphql-transport-ws connection with `connectionParams` ends: its close code.
async function closeCode(wsUrl, connectionParams, discussionId) {
  const ws = createClient({ url: wsUrl, webSocketImpl: WebSocket, connectionParams, retryAttempts: 0 });
  const closed = new Promise((resolve) => {
    ws.subscribe(
      { query: POSTED, variables: { id: discussionId } },
      {
        next: () => resolve('an event'),
        error: (err) => resolve(err?.code ?? String(err)),
        complete: () => resolve('completed'),
      },
    );
  });
  const timeout = new Promise((resolve) => setTimeout(() => resolve('no answer'), EVENT_TIMEOUT_MS));
  const code = await Promise.race([closed, timeout]);
  await ws.dispose();
  return code;
}

// A forged token closes a graphql-transport-ws connection with 4403 (Forbidden), whether it comes
// as `Authorization` (browsers, graphql-ws users) or as `token` (what the Apollo Router sends).
async function refusedToken(checks, wsUrl, discussionId) {
  const codes = [
    await closeCode(wsUrl, { Authorization: 'Bearer not.a.token' }, discussionId),
    await closeCode(wsUrl, { token: 'not.a.token' }, discussionId),
  ];
  checks.check('graphql-ws: a forged token in connectionParams (Authorization, token) closes with 4403', codes, [4403, 4403]);
}

// The legacy `graphql-ws` subprotocol (subscriptions-transport-ws), spoken by hand.
async function legacyProtocol(checks, env, wsUrl, layout) {
  const watched = await watchedDiscussion(env, layout);
  const [, grace] = env.users;
  const socket = new WebSocket(wsUrl, 'graphql-ws');
  const events = new Events();
  const control = new Events();
  socket.on('message', (raw) => {
    const message = JSON.parse(String(raw));
    if (message.type === 'data' && message.id === '1') {
      if (message.payload.errors) {
        events.error(new Error(JSON.stringify(message.payload.errors)));
      } else {
        events.push(message.payload.data.commentPosted);
      }
    } else if (message.type !== 'ka') {
      control.push(message);
    }
  });
  socket.on('error', (err) => control.error(err));
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  try {
    socket.send(JSON.stringify({ type: 'connection_init', payload: { Authorization: `Bearer ${grace.token}` } }));
    const ack = await control.next(EVENT_TIMEOUT_MS);
    checks.check('legacy graphql-ws: the subprotocol is accepted and connection_init acknowledged', [socket.protocol, ack?.type], [
      'graphql-ws',
      'connection_ack',
    ]);
    socket.send(JSON.stringify({ id: '1', type: 'start', payload: { query: POSTED, variables: { id: watched.id } } }));
    await waitUntilLive(events, watched.probePost);
    const posted = await watched.post(watched.id, 'posted while a legacy client listens');
    const result = await awaitTarget(events, (e) => e.slug === posted.slug, watched.isProbe);
    checks.check(`legacy graphql-ws (${layout}): commentPosted arrives as a \`data\` message`, result, {
      target: watched.expected(posted),
      unexpected: [],
    });
    recordEvent(env, 'graphql-ws (legacy)', 'commentPosted', layout, result);
    socket.send(JSON.stringify({ id: '1', type: 'stop' }));
  } finally {
    socket.close();
  }
}

// Subscriptions over a WebSocket on /graphql: graphql-ws on every layout, then urql, Apollo
// Client, refused tokens and the legacy subprotocol once.
async function subscriptionStep(checks, env) {
  const [, grace] = env.users;
  const wsUrl = env.url.replace(/^http/, 'ws');
  const ws = createClient({
    url: wsUrl,
    webSocketImpl: WebSocket,
    connectionParams: { Authorization: `Bearer ${grace.token}` },
    retryAttempts: 0,
  });
  try {
    for (const layout of env.layouts) {
      await graphqlWs(checks, env, ws, layout);
    }
    await urqlSubscription(checks, env, ws, env.layouts[0]);
    await apolloSubscription(checks, env, ws, env.layouts[0]);
  } finally {
    await ws.dispose();
  }
  const anyDiscussion = await watchedDiscussion(env, env.layouts[0]);
  await refusedToken(checks, wsUrl, anyDiscussion.id);
  await legacyProtocol(checks, env, wsUrl, env.layouts[0]);
}

async function main(checks) {
  const [url, setupJson] = process.argv.slice(2);
  if (!url || !setupJson) {
    throw new Error("usage: node tests/node/clients.mjs <threadql /graphql URL> '<setup JSON>'");
  }
  const setup = JSON.parse(setupJson);
  const env = { url, users: setup.users, layouts: setup.layouts, summary: checks.summary };
  for (const step of setup.steps) {
    if (step === 'http') {
      await httpStep(checks, env);
    } else if (step === 'subscriptions') {
      await subscriptionStep(checks, env);
    } else {
      throw new Error(`unknown step ${step}`);
    }
  }
}

await runMain('CLIENTS', new Checks({ layouts: {}, apq: [], events: [] }), main, {
  timeoutMs: RUN_TIMEOUT_MS,
});
