// threadql count widget: the comment count of each discussion an index page links to.
//
//   <a href="/articles/42#comments" data-threadql-count="article-42"></a>
//   <script type="module" src="https://comments.example/embed/count.js"></script>
//
// On import it fills every `[data-threadql-count="<key>"]` element of the page with the comment
// count of the discussion of that key (as the embed shows it: `commentCount`), asking its own
// server for up to 100 distinct keys per `discussionsByKeys` request, and nothing at all when
// the page has no such element. A key without a discussion counts 0. Each element may set its
// own text with `data-threadql-zero`, `data-threadql-one` and `data-threadql-many` (`{n}` is
// the count). Text is set as text only. A request that fails leaves its own elements as they
// are, and one warning is logged. Pages that add elements later call `count()` again:
//
//   import { count } from "https://comments.example/embed/count.js";
//   await count(document.getElementById("more"), { endpoint: "https://comments.example/graphql" });

// Keys per request: what `discussionsByKeys` takes at most.
const KEYS_PER_REQUEST = 100;
// A key is 1 to 512 characters; longer ones cannot name a discussion.
const MAX_KEY = 512;

const SELECTOR = '[data-threadql-count]';

// Control characters, which no key may hold.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

// The default texts, `{n}` being the count.
const TEXTS = { zero: 'No comments', one: '1 comment', many: '{n} comments' };

const COUNTS_QUERY = `query ThreadqlCounts($keys: [String!]!) {
  discussionsByKeys(keys: $keys) { commentCount }
}`;

// The text of `element` for `n` comments: its own template for that case, else the default.
function textFor(element, n) {
  const which = n === 0 ? 'zero' : n === 1 ? 'one' : 'many';
  const attribute = `threadql${which[0].toUpperCase()}${which.slice(1)}`;
  const template = element.dataset[attribute] ?? TEXTS[which];
  return template.replaceAll('{n}', String(n));
}

// The comment counts of `keys` (at most 100), in order, from `endpoint`.
async function fetchCounts(endpoint, keys) {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
    },
    body: JSON.stringify({ query: COUNTS_QUERY, variables: { keys } }),
    credentials: 'omit',
    mode: 'cors',
  });
  const body = await response.json();
  if (!response.ok || body.errors?.length || !Array.isArray(body.data?.discussionsByKeys)) {
    const error = body.errors?.[0];
    throw new Error(error ? `${error.message} (${error.extensions?.code})` : `HTTP ${response.status}`);
  }
  const found = body.data.discussionsByKeys;
  if (found.length !== keys.length) {
    throw new Error(`${found.length} answers for ${keys.length} keys`);
  }
  return found.map((discussion) => discussion?.commentCount ?? 0);
}

/**
 * Fills every `[data-threadql-count]` element in `root` (and `root` itself, when it is one)
 * with its discussion's comment count. Resolves when done; never rejects (an error leaves the
 * elements as they were and logs one warning).
 *
 * - `endpoint`: the GraphQL endpoint (default: `/graphql` on the server this script came from).
 */
export async function count(root = document, options = {}) {
  const elements = [...root.querySelectorAll(SELECTOR)];
  if (root instanceof Element && root.matches(SELECTOR)) {
    elements.unshift(root);
  }
  const byKey = new Map();
  for (const element of elements) {
    const key = element.dataset.threadqlCount;
    // Keys no discussion can have (too long, or with control characters) are left alone.
    if (key && [...key].length <= MAX_KEY && !CONTROL.test(key)) {
      if (!byKey.has(key)) {
        byKey.set(key, []);
      }
      byKey.get(key).push(element);
    }
  }
  if (byKey.size === 0) {
    return;
  }
  let endpoint;
  try {
    endpoint = new URL(options.endpoint ?? '/graphql', import.meta.url);
  } catch (err) {
    console.warn(`threadql: cannot show the comment counts: ${err?.message ?? err}`);
    return;
  }
  const keys = [...byKey.keys()];
  const batches = [];
  for (let i = 0; i < keys.length; i += KEYS_PER_REQUEST) {
    batches.push(keys.slice(i, i + KEYS_PER_REQUEST));
  }
  // Each batch fills its own elements: a refused batch (a key the server refuses, say) leaves
  // only its elements as they were.
  const results = await Promise.allSettled(batches.map((batch) => fetchCounts(endpoint, batch)));
  const failed = [];
  results.forEach((result, b) => {
    if (result.status === 'rejected') {
      failed.push(result.reason?.message ?? String(result.reason));
      return;
    }
    batches[b].forEach((key, i) => {
      for (const element of byKey.get(key)) {
        element.textContent = textFor(element, result.value[i]);
      }
    });
  });
  if (failed.length > 0) {
    console.warn(`threadql: cannot show the comment counts: ${failed.join('; ')}`);
  }
}

// On import, the page's own elements, once it is parsed.
if (typeof document !== 'undefined') {
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', () => count(), { once: true });
  } else {
    count();
  }
}
