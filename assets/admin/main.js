// The console's entry: signing in (a pasted token, or one handed over as `#token=…`, which leaves
// the address bar at once), checking that the token may moderate, the views and the live
// connection of a session, and signing out.

import { Api, ApiError, Live, describe } from './api.js';
import { BansView } from './bans.js';
import { DiscussionsView } from './discussions.js';
import { clearError } from './dom.js';
import { HistoryDrawer } from './history.js';
import { bindKeys, showKeys } from './keys.js';
import { LogView } from './log.js';
import { QueueView } from './queue.js';

const TOKEN_KEY = 'threadql-admin-token';
// What a sign-out that reloads the page leaves for the sign-in form to say.
const MESSAGE_KEY = 'threadql-admin-message';
const VIEWER = 'query AdminViewer { viewer { id name roles } }';
const MODERATING = ['moderator', 'admin'];
const VIEWS = ['queue', 'discussions', 'bans', 'log'];

// Session storage, which a browser may refuse: then the token lasts as long as the page.
const stored = {
  get(key) {
    try {
      return window.sessionStorage.getItem(key);
    } catch {
      return null;
    }
  },
  set(key, value) {
    try {
      window.sessionStorage.setItem(key, value);
    } catch {
      // Kept in the page only.
    }
  },
  remove(key) {
    try {
      window.sessionStorage.removeItem(key);
    } catch {
      // Nothing was kept.
    }
  },
};

// The token of a `#token=…` fragment, taken out of the address (and the history entry) at once.
function takeFragmentToken() {
  const hash = window.location.hash;
  if (!hash.startsWith('#') || hash.length < 2) {
    return null;
  }
  const params = new URLSearchParams(hash.slice(1));
  if (!params.has('token')) {
    return null;
  }
  window.history.replaceState(window.history.state, '', `${window.location.pathname}${window.location.search}`);
  return params.get('token').trim() || null;
}

// What a session shares with its views: the API and live connection (replaced at each sign-in).
const ctx = {
  api: null,
  live: null,
  openHistory: (author, back) => drawer.open(author, back),
  filterQueue: (discussion) => {
    showView('queue', false);
    queue.setFilter(discussion);
  },
  banNetwork: (cidr) => {
    showView('bans', false);
    views.bans.showNetwork(cidr);
  },
};
const queue = new QueueView(ctx);
const drawer = new HistoryDrawer(ctx);
const views = {
  queue,
  discussions: new DiscussionsView(ctx),
  bans: new BansView(ctx),
  log: new LogView(ctx),
};
let current = null;
let session = 0;

function showView(name, load = true) {
  current = name;
  for (const view of VIEWS) {
    document.getElementById(`view-${view}`).hidden = view !== name;
  }
  for (const button of document.querySelectorAll('#views [data-view]')) {
    if (button.dataset.view === name) {
      button.setAttribute('aria-current', 'page');
    } else {
      button.removeAttribute('aria-current');
    }
  }
  if (load) {
    views[name].show();
  }
}

// Shows the sign-in form alone, with `message`.
function showSignIn(message) {
  current = null;
  for (const view of VIEWS) {
    document.getElementById(`view-${view}`).hidden = true;
  }
  document.getElementById('views').hidden = true;
  document.getElementById('session').hidden = true;
  document.getElementById('sign-in').hidden = false;
  document.getElementById('sign-in-message').textContent = message ?? '';
  document.getElementById('token').value = '';
}

// Ends the session: the token is forgotten and the page starts again (nothing of the session
// stays in it), saying `message` on the sign-in form.
function signOut(message) {
  stored.remove(TOKEN_KEY);
  if (message) {
    stored.set(MESSAGE_KEY, message);
  }
  ctx.live?.stop();
  window.location.replace(window.location.pathname);
}

async function signIn(token) {
  session += 1;
  const mine = session;
  let ended = false;
  // A token the server no longer takes (expired, revoked keys): back to the sign-in form.
  const unauthenticated = (err) => {
    if (!ended && mine === session) {
      ended = true;
      if (current === null) {
        stored.remove(TOKEN_KEY);
        showSignIn(`This token was refused: ${describe(err)}`);
      } else {
        signOut(`Your sign-in ended: ${describe(err)}. Sign in again.`);
      }
    }
  };
  const api = new Api(token, unauthenticated);
  let viewer;
  try {
    viewer = (await api.run(VIEWER)).viewer;
  } catch (err) {
    if (!(err instanceof ApiError) || err.code !== 'UNAUTHENTICATED') {
      showSignIn(`Signing in failed: ${describe(err)}`);
    }
    return;
  }
  if (mine !== session) {
    return;
  }
  if (!viewer || !viewer.roles.some((role) => MODERATING.includes(role))) {
    stored.remove(TOKEN_KEY);
    showSignIn('This token cannot moderate.');
    return;
  }
  stored.set(TOKEN_KEY, token);
  ctx.live?.stop();
  ctx.api = api;
  ctx.live = new Live(token, {
    state: (state) => {
      document.body.dataset.live = state;
      document.getElementById('live-state').textContent = state === 'live' ? 'Live updates: on' : 'Live updates: reconnecting';
    },
    resumed: () => {
      if (current === 'queue') {
        queue.resumed();
      }
    },
    unauthenticated: () => unauthenticated(new ApiError('the server refused the token for live updates', 'UNAUTHENTICATED')),
  });
  ctx.live.start();
  document.getElementById('who-name').textContent = viewer.name;
  document.getElementById('who-id').textContent = viewer.id;
  document.getElementById('sign-in').hidden = true;
  document.getElementById('session').hidden = false;
  document.getElementById('views').hidden = false;
  clearError();
  showView('queue');
}

function start() {
  document.getElementById('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = document.getElementById('token').value.trim();
    if (token !== '') {
      document.getElementById('sign-in-message').textContent = 'Signing in…';
      signIn(token);
    }
  });
  document.getElementById('sign-out').addEventListener('click', () => signOut('Signed out.'));
  document.getElementById('error-close').addEventListener('click', () => {
    clearError();
    document.getElementById('main').focus();
  });
  for (const button of document.querySelectorAll('#views [data-view]')) {
    button.addEventListener('click', () => showView(button.dataset.view));
  }
  document.getElementById('show-keys').addEventListener('click', () => showKeys());
  bindKeys(queue, () => current);
  // A host's sign-in may hand over a token later, to the open page.
  window.addEventListener('hashchange', () => {
    const token = takeFragmentToken();
    if (token) {
      signIn(token);
    }
  });

  const message = stored.get(MESSAGE_KEY);
  stored.remove(MESSAGE_KEY);
  const token = takeFragmentToken() ?? stored.get(TOKEN_KEY);
  if (token) {
    signIn(token);
  } else {
    showSignIn(message);
  }
}

start();
