// Puts a live threadql into a real Apollo Federation v2 supergraph and queries it through a real
// gateway.
//
//   node tests/node/federation.mjs http://127.0.0.1:8080/graphql '<seed JSON>'
//
// 1. Fetches threadql's SDL over HTTP (`{ _service { sdl } }`).
// 2. Serves a second subgraph, "reviews", on an ephemeral port: it adds `Discussion.rating`,
//    `Comment.helpful` (threadql resolves `Comment.discussion`) and has root fields
//    `featuredComments` and `ratedDiscussions` that return Comment and Discussion references.
//    Serves a third, "articles", a site's article service: its articles reference their
//    discussion by the article's own key (`Discussion @key(fields: "key")`), and one article has
//    no discussion yet.
// 3. Composes the three with @apollo/composition; any composition error, or any hint about keys
//    or entities, fails the run. Every hint is printed.
// 4. Serves the supergraph with @apollo/gateway and runs queries that make the query planner
//    fetch Comment and Discussion entities from threadql (starting at reviews), Discussion
//    entities by key (starting at articles, in one database command, then on to reviews by
//    id), and from reviews (starting at threadql), and one that needs the gateway to forward
//    `Authorization`.
//
// The seed (written by tests/integration/federation.rs) is
//   { "moderatorToken": "...",
//     "discussions": [{ "id", "key", "title", "layout",
//                       "comments": [{ "slug", "parentSlug", "text", "author", "replyCount",
//                                      "revisions": [earlier texts] }] }] }
// with each discussion's comments in threaded order.
//
// Prints what it does, then one summary line,
//   FEDERATION {"composed":true,"hints":[...],"checks":[...],"failures":[...],
//               "entities":{"threadql":{"Comment":n,"Discussion":n},"reviews":{...}}}
// where `entities` counts the representations the gateway sent to each subgraph's `_entities`.
// Exits with 1 when composition failed or any check failed.

import { composeServices } from '@apollo/composition';
import { ApolloGateway, RemoteGraphQLDataSource } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';

import { Checks, postJson, runMain } from './checks.mjs';

const RUN_TIMEOUT_MS = 120_000;

const REVIEWS_SDL = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.5", import: ["@key"])

  type Query {
    "Comments picked by the editors, as references to threadql's comments."
    featuredComments: [Comment!]!
    "The rated discussions, best rated first, as references to threadql's discussions."
    ratedDiscussions: [Discussion!]!
  }

  type Discussion @key(fields: "id") {
    id: ID!
    "The readers' rating."
    rating: Int!
  }

  type Comment @key(fields: "discussionId slug") {
    discussionId: ID!
    slug: String!
    "How many readers liked it."
    helpful: Int!
  }
`;

const ARTICLES_SDL = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.5", import: ["@key"])

  type Query {
    "The site's articles."
    articles: [Article!]!
  }

  type Article @key(fields: "slug") {
    slug: String!
    headline: String!
    "The article's discussion, referenced by the article's own key (null while it has none)."
    discussion: Discussion
  }

  type Discussion @key(fields: "key", resolvable: false) {
    key: String
  }
`;

// An article whose discussion was never created: threadql resolves its key to null.
const ARTICLE_WITHOUT_DISCUSSION = '/articles/not-discussed-yet';

// Hints about keys or entities mean the supergraph cannot join the subgraphs as intended.
const KEY_HINT = /key|entit|resolvable/i;

const checks = new Checks({ composed: false, hints: [], entities: {} });
const { summary } = checks;
const check = (name, actual, expected) => checks.check(name, actual, expected);

// The reviews subgraph's own data: a rating per discussion, a count of "helpful" marks per comment.
function reviewsData(seed) {
  const ratings = new Map();
  const helpful = new Map();
  seed.discussions.forEach((discussion, d) => {
    ratings.set(discussion.id, d + 3);
    discussion.comments.forEach((comment, c) => {
      helpful.set(`${discussion.id} ${comment.slug}`, 100 * (d + 1) + c);
    });
  });
  // The editors feature every seeded comment, newest discussion first, last comment first, so
  // the gateway has to keep entities of several discussions apart.
  const featured = seed.discussions
    .flatMap((discussion) =>
      discussion.comments.map((comment) => ({ discussionId: discussion.id, slug: comment.slug })),
    )
    .reverse();
  return { ratings, helpful, featured };
}

function reviewsResolvers({ ratings, helpful, featured }) {
  const commentKey = (comment) => `${comment.discussionId} ${comment.slug}`;
  const known = (comment) => {
    if (!helpful.has(commentKey(comment))) {
      throw new Error(`reviews knows no comment ${commentKey(comment)}`);
    }
    return { discussionId: comment.discussionId, slug: comment.slug };
  };
  return {
    Query: {
      featuredComments: () => featured,
      ratedDiscussions: () =>
        [...ratings.entries()].sort((a, b) => b[1] - a[1]).map(([id]) => ({ id })),
    },
    Discussion: {
      __resolveReference: (reference) => {
        if (!ratings.has(reference.id)) {
          throw new Error(`reviews knows no discussion ${reference.id}`);
        }
        return { id: reference.id };
      },
      rating: (discussion) => ratings.get(discussion.id),
    },
    Comment: {
      __resolveReference: known,
      helpful: (comment) => helpful.get(commentKey(comment)),
    },
  };
}

// The articles subgraph's data: an article per seeded discussion, keyed as it, and one more.
function articlesData(seed) {
  return [
    ...seed.discussions.map((discussion) => ({
      slug: discussion.key.replace('/articles/', ''),
      headline: `About ${discussion.title}`,
      key: discussion.key,
    })),
    { slug: 'not-discussed-yet', headline: 'Nobody said a word', key: ARTICLE_WITHOUT_DISCUSSION },
  ];
}

function articlesResolvers(articles) {
  return {
    Query: {
      articles: () => articles,
    },
    Article: {
      __resolveReference: (reference) => articles.find((a) => a.slug === reference.slug),
      discussion: (article) => ({ key: article.key }),
    },
  };
}

// Database commands threadql has sent so far, from its /metrics.
async function threadqlCommands(url) {
  const response = await fetch(new URL('/metrics', url), { signal: AbortSignal.timeout(15_000) });
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('threadql_db_commands_total{'))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

// Representations the gateway sent to each subgraph's `_entities` since the last `take()`.
class EntityLog {
  constructor() {
    this.current = [];
  }

  record(subgraph, request) {
    const representations = request.variables?.representations;
    if (Array.isArray(representations)) {
      for (const representation of representations) {
        this.current.push({ subgraph, ...representation });
        const counts = (summary.entities[subgraph] ??= {});
        counts[representation.__typename] = (counts[representation.__typename] ?? 0) + 1;
      }
    }
  }

  // The distinct representations of one subgraph and type, sorted, as strings.
  take() {
    const taken = this.current;
    this.current = [];
    return (subgraph, typename) =>
      [
        ...new Set(
          taken
            .filter((r) => r.subgraph === subgraph && r.__typename === typename)
            .map((r) => {
              if (typename === 'Comment') return `${r.discussionId} ${r.slug}`;
              return r.id ?? `key ${r.key}`;
            }),
        ),
      ].sort();
  }
}

const byKey = (entries) => [...entries].sort();

async function main() {
  const [url, seedJson] = process.argv.slice(2);
  if (!url || !seedJson) {
    throw new Error("usage: node tests/node/federation.mjs <threadql /graphql URL> '<seed JSON>'");
  }
  const seed = JSON.parse(seedJson);
  const servers = [];
  try {
    await run(url, seed, servers);
  } finally {
    for (const server of servers.reverse()) {
      await server.stop();
    }
  }
}

async function run(url, seed, servers) {
  // 1. threadql's SDL, live.
  const service = await postJson(url, { query: '{ _service { sdl } }' });
  const sdl = service?.data?._service?.sdl;
  if (typeof sdl !== 'string') {
    throw new Error(`threadql gave no SDL: ${JSON.stringify(service)}`);
  }
  check('threadql SDL declares Discussion @key(fields: "id")', /type Discussion @key\(fields: "id"\)/.test(sdl), true);
  check(
    'threadql SDL declares Discussion @key(fields: "key") as its second key',
    /type Discussion @key\(fields: "id"\) @key\(fields: "key"\)/.test(sdl),
    true,
  );
  check(
    'threadql SDL declares Comment @key(fields: "discussionId slug")',
    /type Comment @key\(fields: "discussionId slug"\)/.test(sdl),
    true,
  );

  // 2. The reviews subgraph.
  const data = reviewsData(seed);
  const reviews = new ApolloServer({
    schema: buildSubgraphSchema({ typeDefs: parse(REVIEWS_SDL), resolvers: reviewsResolvers(data) }),
    plugins: [ApolloServerPluginInlineTraceDisabled()],
  });
  servers.push(reviews);
  const { url: reviewsUrl } = await startStandaloneServer(reviews, {
    listen: { host: '127.0.0.1', port: 0 },
  });
  console.log(`reviews subgraph at ${reviewsUrl}`);
  const articleList = articlesData(seed);
  const articles = new ApolloServer({
    schema: buildSubgraphSchema({ typeDefs: parse(ARTICLES_SDL), resolvers: articlesResolvers(articleList) }),
    plugins: [ApolloServerPluginInlineTraceDisabled()],
  });
  servers.push(articles);
  const { url: articlesUrl } = await startStandaloneServer(articles, {
    listen: { host: '127.0.0.1', port: 0 },
  });
  console.log(`articles subgraph at ${articlesUrl}`);

  // 3. Composition.
  const composition = composeServices([
    { name: 'threadql', typeDefs: parse(sdl), url },
    { name: 'reviews', typeDefs: parse(REVIEWS_SDL), url: reviewsUrl },
    { name: 'articles', typeDefs: parse(ARTICLES_SDL), url: articlesUrl },
  ]);
  for (const hint of composition.hints ?? []) {
    const text = `${hint.definition.code}: ${hint.message}`;
    summary.hints.push(text);
    console.log(`hint  ${text}`);
  }
  if (composition.errors) {
    for (const error of composition.errors) {
      console.log(`composition error: ${error.extensions?.code ?? ''} ${error.message}`);
    }
    checks.fail('composition', composition.errors.map((e) => e.message).join('; '));
    return;
  }
  summary.composed = true;
  check(
    'no composition hint concerns keys or entities',
    summary.hints.filter((hint) => KEY_HINT.test(hint)),
    [],
  );

  // 4. The gateway. It forwards the client's `Authorization` to threadql, as a router would.
  const log = new EntityLog();
  const gateway = new ApolloGateway({
    supergraphSdl: composition.supergraphSdl,
    buildService: ({ name, url: subgraphUrl }) =>
      new RemoteGraphQLDataSource({
        url: subgraphUrl,
        willSendRequest({ request, context }) {
          if (name === 'threadql' && context.authorization) {
            request.http.headers.set('authorization', context.authorization);
          }
          log.record(name, request);
        },
      }),
  });
  const router = new ApolloServer({ gateway });
  servers.push(router);
  const { url: routerUrl } = await startStandaloneServer(router, {
    listen: { host: '127.0.0.1', port: 0 },
    context: async ({ req }) => ({ authorization: req.headers.authorization }),
  });
  console.log(`gateway at ${routerUrl}`);

  const query = async (document, variables = {}, headers = {}) => {
    const response = await postJson(routerUrl, { query: document, variables }, headers);
    if (response.errors) {
      throw new Error(`the gateway answered with errors: ${JSON.stringify(response.errors)}`);
    }
    return response.data;
  };

  const discussions = new Map(seed.discussions.map((d) => [d.id, d]));
  const seeded = (discussionId, slug) => {
    const comment = discussions.get(discussionId)?.comments.find((c) => c.slug === slug);
    if (!comment) {
      throw new Error(`no seeded comment ${discussionId} ${slug}`);
    }
    return comment;
  };

  // (a) reviews → threadql: Comment and Discussion entities come from threadql's `_entities`.
  const featured = await query(`{
    featuredComments {
      discussionId slug helpful
      text author { name } replyCount parent { slug }
      discussion { id rating title commentCount layout }
    }
    ratedDiscussions { id rating title commentCount layout } }`);
  check(
    'reviews → threadql: every featured comment with its threadql fields, in reviews order',
    featured.featuredComments,
    data.featured.map(({ discussionId, slug }) => {
      const comment = seeded(discussionId, slug);
      const discussion = discussions.get(discussionId);
      return {
        discussionId,
        slug,
        helpful: data.helpful.get(`${discussionId} ${slug}`),
        text: comment.text,
        author: { name: comment.author },
        replyCount: comment.replyCount,
        parent: comment.parentSlug === null ? null : { slug: comment.parentSlug },
        discussion: {
          id: discussionId,
          rating: data.ratings.get(discussionId),
          title: discussion.title,
          commentCount: discussion.comments.length,
          layout: discussion.layout,
        },
      };
    }),
  );
  check(
    'reviews → threadql: every rated discussion with its threadql fields, best rated first',
    featured.ratedDiscussions,
    [...seed.discussions]
      .sort((a, b) => data.ratings.get(b.id) - data.ratings.get(a.id))
      .map((d) => ({
        id: d.id,
        rating: data.ratings.get(d.id),
        title: d.title,
        commentCount: d.comments.length,
        layout: d.layout,
      })),
  );
  const fetchedA = log.take();
  check(
    'reviews → threadql: the gateway fetched every featured Comment from threadql',
    fetchedA('threadql', 'Comment'),
    byKey(data.featured.map(({ discussionId, slug }) => `${discussionId} ${slug}`)),
  );
  check(
    'reviews → threadql: the gateway fetched every Discussion from threadql',
    fetchedA('threadql', 'Discussion'),
    byKey(seed.discussions.map((d) => d.id)),
  );

  // (a') articles → threadql → reviews: discussions referenced by the article's key, all of
  // them in one `_entities` call and one database command, then on to reviews by their id.
  const commandsBefore = await threadqlCommands(url);
  const byArticle = await query(`{
    articles { slug headline discussion { key title commentCount layout rating } } }`);
  const commandsSpent = (await threadqlCommands(url)) - commandsBefore;
  check(
    'articles → threadql → reviews: every article with its discussion by key, null where it has none',
    byArticle.articles,
    articleList.map((article) => {
      const discussion = seed.discussions.find((d) => d.key === article.key);
      return {
        slug: article.slug,
        headline: article.headline,
        discussion: discussion
          ? {
              key: discussion.key,
              title: discussion.title,
              commentCount: discussion.comments.length,
              layout: discussion.layout,
              rating: data.ratings.get(discussion.id),
            }
          : null,
      };
    }),
  );
  const fetchedByKey = log.take();
  check(
    'articles → threadql: the gateway fetched every Discussion from threadql by key, then from reviews by id',
    [fetchedByKey('threadql', 'Discussion'), fetchedByKey('reviews', 'Discussion')],
    [
      byKey(articleList.map((a) => `key ${a.key}`)),
      byKey(seed.discussions.map((d) => d.id)),
    ],
  );
  check('articles → threadql: the discussions by key cost threadql one database command', commandsSpent, 1);

  // (b) threadql → reviews: threadql's lists, completed with the reviews subgraph's fields.
  for (const discussion of seed.discussions) {
    const label = `threadql → reviews (${discussion.layout})`;
    const answer = await query(
      `query($id: ID!) {
        discussion(id: $id) {
          title rating
          comments(order: THREADED) { totalCount nodes { slug text helpful } }
          threads { nodes { slug helpful replies { nodes { slug helpful discussion { rating } } } } }
        } }`,
      { id: discussion.id },
    );
    const helpfulOf = (slug) => data.helpful.get(`${discussion.id} ${slug}`);
    const rating = data.ratings.get(discussion.id);
    check(`${label}: a discussion with its rating and its comments' helpful`, answer.discussion, {
      title: discussion.title,
      rating,
      comments: {
        totalCount: discussion.comments.length,
        nodes: discussion.comments.map((c) => ({ slug: c.slug, text: c.text, helpful: helpfulOf(c.slug) })),
      },
      threads: {
        nodes: discussion.comments
          .filter((c) => c.parentSlug === null)
          .map((top) => ({
            slug: top.slug,
            helpful: helpfulOf(top.slug),
            replies: {
              nodes: discussion.comments
                .filter((c) => c.parentSlug === top.slug)
                .map((reply) => ({ slug: reply.slug, helpful: helpfulOf(reply.slug), discussion: { rating } })),
            },
          })),
      },
    });
    const fetched = log.take();
    check(
      `${label}: the gateway fetched the Discussion and every Comment from reviews`,
      [fetched('reviews', 'Discussion'), fetched('reviews', 'Comment')],
      [[discussion.id], byKey(discussion.comments.map((c) => `${discussion.id} ${c.slug}`))],
    );
    check(
      `${label}: nothing was fetched back from threadql`,
      [fetched('threadql', 'Discussion'), fetched('threadql', 'Comment')],
      [[], []],
    );
  }

  // (c) `Authorization` reaches threadql through the gateway: revisions are for moderators only.
  for (const discussion of seed.discussions) {
    const edited = discussion.comments.find((c) => c.revisions.length > 0);
    if (!edited) {
      throw new Error(`the seed of ${discussion.id} has no edited comment`);
    }
    const document = `query($d: ID!, $s: String!) {
      comment(discussionId: $d, slug: $s) { text helpful revisions { text } } }`;
    const variables = { d: discussion.id, s: edited.slug };
    const asModerator = await query(document, variables, {
      authorization: `Bearer ${seed.moderatorToken}`,
    });
    const anonymous = await query(document, variables);
    const helpful = data.helpful.get(`${discussion.id} ${edited.slug}`);
    check(
      `Authorization through the gateway (${discussion.layout}): a moderator sees the revisions, nobody else`,
      [asModerator.comment, anonymous.comment],
      [
        { text: edited.text, helpful, revisions: edited.revisions.map((text) => ({ text })) },
        { text: edited.text, helpful, revisions: null },
      ],
    );
    log.take();
  }
}

await runMain('FEDERATION', checks, main, {
  timeoutMs: RUN_TIMEOUT_MS,
  failed: (result) => !result.composed,
});
