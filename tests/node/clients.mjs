// Uses threadql the way applications do, with real GraphQL clients: Apollo Client 4 and urql 6.
//
//   node tests/node/clients.mjs http://127.0.0.1:8080/graphql '<setup JSON>'
//
// The setup (written by tests/integration/clients.rs) is
//   { "users": [{ "name": "Ada Lovelace", "token": "<JWT>" }, { "name": "Grace Hopper", ... }],
//     "layouts": ["PER_COMMENT", ...], "steps": ["http"] }
//
// "http": for each layout, creates a discussion and posts a thread (top-level comments and replies
// five levels deep), alternating Apollo Client as the first user and urql as the second; reads it
// back as a tree of nested `replies` with both clients (and once more from Apollo's normalized
// cache), pages a sub-discussion and both comment orders by cursor until `hasNextPage` is false,
// reads offset windows; then checks Apollo's automatic persisted queries over POST and GET.
//
// Prints one line per check, then
//   CLIENTS {"layouts":{"<LAYOUT>":{"comments":n,"pages":{...}}},"apq":[...],
//            "checks":[...],"failures":[...]}
// and exits with 1 when a check failed.

import { createHash } from 'node:crypto';

import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { Client, cacheExchange, fetchExchange } from '@urql/core';

import { Checks, REQUEST_TIMEOUT_MS, runMain } from './checks.mjs';

const RUN_TIMEOUT_MS = 150_000;

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
    } else {
      throw new Error(`unknown step ${step}`);
    }
  }
}

await runMain('CLIENTS', new Checks({ layouts: {}, apq: [] }), main, {
  timeoutMs: RUN_TIMEOUT_MS,
});
